"""Intel MPI through the real two-node Slurm of test_real_slurm.py (the same session cluster,
scripts/slurm-up.sh): its mpirun (Hydra) inside the allocation."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.cli import main
from tests.backend_support import private_mpi
from tests.launch.slurm.test_real_slurm import metas, rows
from tests.launch.slurm.util import Cluster

pytestmark = [pytest.mark.slurm, pytest.mark.mpi, pytest.mark.slow]

SPEC = """\
[campaign]
name = "slurm-impi"

[measure]
mpi = ["impi==2021.18.1"]
collectives = "bcast"
algorithms = ["default", "preset1"]
sizes = [1, 1024]
nprocs = 4
map_by = "{map_by}"
iterations = 20
warmup = 2

[run]
backend = "slurm"
timeout = 60
seed = 5

[run.slurm]
nodes = 2
tasks_per_node = 2
launcher = "{launcher}"
"""


def test_intel_mpi_mpirun_inside_the_allocation(slurm: Cluster, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """mpirun runs the default and a forced preset over both nodes; what it cannot honour
    (srun as the launcher, one rank per node in turn) is refused before anything runs or
    is written."""
    private_mpi("impi")  # skips where the test MPIs are not installed
    # The emulated nodes are host names only (NodeAddr=127.0.0.1, no DNS entry): Hydra's
    # proxies, started by srun, call back to the host name unless given an interface.
    monkeypatch.setenv("I_MPI_HYDRA_IFACE", "lo")
    spec, out = tmp_path / "spec.toml", tmp_path / "res"
    for map_by, launcher, said in (("node", "mpirun", "ignores -ppn"),
                                   ("core", "srun", "valid: launcher = \"mpirun\"")):
        spec.write_text(SPEC.format(map_by=map_by, launcher=launcher))
        assert main(["run", str(spec), "-o", str(tmp_path / map_by)]) == 2
        # (a first build of the kernel says so on a line of its own before the refusal)
        err = "\n".join(line for line in capsys.readouterr().err.strip().splitlines()
                        if not line.startswith("collbench: built the kernel"))
        assert said in err and len(err.splitlines()) == 1, err
        assert not (tmp_path / map_by).exists()  # refused before the folder is made
    spec.write_text(SPEC.format(map_by="core", launcher="mpirun"))
    assert main(["run", str(spec), "-o", str(out)]) == 0
    got = rows(out)
    assert len(got) == 4 and {r["status"] for r in got} == {"ok"}, got
    assert {(r["mpi"], r["backend"], r["nodes"]) for r in got} == \
        {("impi-2021.18.1", "slurm", 2)}
    assert {r["algorithm"] for r in got} == {"default", "preset1"}
    for meta in metas(out):
        assert Path(meta["command"][0]).name == "mpirun"
        assert meta["slurm"]["rank_hosts"] == ["n1", "n1", "n2", "n2"]  # each node in turn
