"""How messages share time when a collective is predicted: the `--network` choices of
`model predict`, `tune --model`, `compare --against MODEL` and `model fit` (docs/models.md).

    network(name) -> Network      NETWORKS by name, a one-line error otherwise
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from collbench.errors import choice_error
from collbench.models.algorithms import Sends


@dataclass(frozen=True)
class Network:
    """How messages share time (models.algorithms.simulate): `overlap` latencies, transfers
    that wait for the receive (`matched`), sends of `rendezvous` bytes or more that wait
    for their receiver."""

    name: str
    overlap: bool
    rendezvous: int | None = None
    matched: bool = False
    shared: bool = False
    loop: bool = False  # time as OSU's loop does: from each rank's exit of the barrier

    @property
    def sends(self) -> Sends:
        return Sends(self.overlap, self.rendezvous, self.matched, self.shared)


NETWORKS: Final = {
    # Open MPI over shared memory / a NIC: eager sends leave at once and overlap their
    # latency; from the sm BTL's eager limit on, a rendezvous
    "mpi": Network("mpi", True, 4096),
    # SimGrid SMPI: both sides matched before any transfer; detached (non-waiting) sends
    # below smpi/send-is-detached-thresh; concurrent flows share links (models.fluid)
    "smpi": Network("smpi", True, 65536, True, shared=True, loop=True),
    # whole transfers one after another per rank, Pjesivac-Grbovic-style (γ_k = k)
    "serial": Network("serial", False),
}
DEFAULT_NETWORK: Final = "mpi"


def network(name: str) -> Network:
    if name not in NETWORKS:
        raise choice_error("models", "--network", name, NETWORKS)
    return NETWORKS[name]
