"""A cluster description (TOML): nodes, sockets, cores, per-level latency/bandwidth, topology.

Validated with pydantic; every problem is one line `<file>: <key.path>: <problem>; valid:
...`, reported before any simulation starts. Every number is bounded (docs/simgrid.md,
"Bounds"): latencies 1 ns to 1 s, bandwidths 1 kB/s to 10 TB/s, overheads and hop
latencies 0 to 1 s, factors 1e-3 to 1e3, sizes and thresholds 0 to 2^40 bytes, counts 1 to
2^17, oversubscription 1 to 1000, [calibration] numbers -1e18 to 1e18. The numbers per
level are what a ping-pong between two ranks measures at that level (OSU's one-way latency
and bandwidth in MB/s = 1e6 B/s): `intra_socket` (two cores of one socket), `inter_socket`
(two sockets of one node), optionally `inter_package` (two sockets of one node in different
packages, `sockets_per_package`; absent: inter_socket's numbers), `inter_node` (two
nodes). Per level, `send_overhead_us` /
`recv_overhead_us` / `overhead_per_size` are the CPU time per message (LogGP o_s, o_r, part
of latency_us), `lat_factor` / `bw_factor` the size-dependent corrections of the link,
`load_latency_us` the latency a message gains when more cores of its node are busy than a
ping-pong's two (fitted to barrier minima: `calibrate --load-barrier`).
`[memory]` says how concurrent flows share a node, which no ping-pong shows:
`receiver_copies` (a sender's concurrent messages each get the full link: the receivers
copy) and `socket_bandwidth_mbs` (one bandwidth per socket and direction that all flows
leaving, or entering, a socket share; 0 = none). The node's card (inter_node bandwidth) is
always shared by the node's flows. collbench.platforms.simgrid_xml turns it into SimGrid XML.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from collbench.errors import UserError, did_you_mean
from collbench.inputs import load_toml, read_text
from collbench.spec import format_validation_error
from collbench.spec.fields import _Problem as _Below
from collbench.spec.fields import one_of as _one_of
from collbench.spec.simgrid import cfg_problem

TOPOLOGIES: Final = ("flat", "fat-tree")
LEVELS: Final = ("intra_socket", "inter_socket", "inter_node")
# The levels a platform may describe: LEVELS plus `inter_package` (two sockets of one node
# in different packages, when a node's sockets are grouped: an EPYC's CCXs in its two
# processors). Monitoring and explain count an inter-package message as inter-socket.
PLATFORM_LEVELS: Final = ("intra_socket", "inter_socket", "inter_package", "inter_node")
MAX_CORES: Final = 1 << 17  # beyond this SMPI's one-process simulation is out of reach
MAX_BYTES: Final = 1 << 40  # sizes and thresholds (a message is at most 1 GiB: spec)
MAX_FACTORS: Final = 1024  # entries of a factor table (calibrate writes one per size)
# --cfg keys collbench sets per launch (placement, algorithm forcing): not for a platform.
_BUILTIN_DIR: Final = "builtin"


class _Problem(ValueError):
    pass


@dataclass(frozen=True)
class _Range:
    """An inclusive range checked after pydantic's own sign constraints (whose messages
    are kept): a value outside is `<value> is not valid; valid: <words>`."""

    low: float
    high: float
    words: str

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high and math.isfinite(value)

    def __call__(self, value: Any) -> Any:
        if not self.holds(value):
            raise _Problem(f"{value!r} is not valid; valid: {self.words}")
        return value


# Physically meaningful ranges: beyond them a number is a typo or a unit slip, and SMPI
# would simulate times no run takes (or inf).
LATENCY: Final = _Range(1e-3, 1e6, "0.001 to 1e+06 µs (1 ns to 1 s)")
BANDWIDTH: Final = _Range(1e-3, 1e7, "0.001 to 1e+07 MB/s (1 kB/s to 10 TB/s)")
OVERHEAD: Final = _Range(0.0, 1e6, "0 to 1e+06 µs (1 s)")
FACTOR: Final = _Range(1e-3, 1e3, "a factor from 0.001 to 1000")
BYTES: Final = _Range(0, MAX_BYTES, f"0 to {MAX_BYTES} bytes (1 TiB)")
COUNT: Final = _Range(1, MAX_CORES, f"1 to {MAX_CORES}")
OVERSUBSCRIPTION: Final = _Range(1.0, 1e3, "1 to 1000")
# (errors in % of times from 1 ns to 1e12 µs stay below 1e17)
CALIBRATION_NUMBER: Final = _Range(-1e18, 1e18, "a number from -1e18 to 1e18")


def _name(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", value):
        raise _Problem(f"{value!r} is not a valid name; use letters, digits, '_', '.' and '-'")
    return value


def _optional_bandwidth(value: float) -> float:
    """0 (no limit) or a bandwidth within BANDWIDTH's range."""
    if value != 0 and not BANDWIDTH.holds(value):
        raise _Problem(f"{value!r} is not valid; valid: 0 (no limit) or {BANDWIDTH.words}")
    return value


def _cfg_item(value: str) -> str:
    problem = cfg_problem(value)
    if problem:
        raise _Problem(problem)
    return value


def _pairs(value: Any) -> Any:
    """TOML arrays [[bytes, factor], ...] as tuples (strict mode wants tuples)."""
    if isinstance(value, list):
        return [tuple(v) if isinstance(v, list) else v for v in value]
    return value


def _factors(value: list[tuple[int, float]]) -> list[tuple[int, float]]:
    if not value or value[0][0] != 0:
        raise _Problem("the first entry must start at 0 bytes, e.g. [[0, 1.0], [65536, 0.9]]")
    if len(value) > MAX_FACTORS:
        raise _Problem(f"{len(value)} entries is not valid; valid: at most {MAX_FACTORS}")
    for (a, _), (b, _) in itertools.pairwise(value):
        if b <= a:
            raise _Problem(f"sizes must increase: {b} comes after {a}")
    for size, factor in value:
        if not BYTES.holds(size):
            raise _Problem(f"size {size} is not valid; valid: {BYTES.words}")
        if not FACTOR.holds(factor):
            raise _Problem(f"factor {factor!r} at {size} B is not valid; valid: "
                           f"{FACTOR.words}")
    return value


def _overhead_rows(value: list[tuple[int, float, float]]) -> list[tuple[int, float, float]]:
    """[[from_bytes, send_us, recv_us], ...]: from 0 bytes, sizes increasing, bounded."""
    if not value:
        return value
    if value[0][0] != 0:
        raise _Problem("the first entry must start at 0 bytes, e.g. [[0, 0.1, 0.05], "
                       "[4096, 0.4, 0.1]]")
    if len(value) > MAX_FACTORS:
        raise _Problem(f"{len(value)} entries is not valid; valid: at most {MAX_FACTORS}")
    for (a, *_), (b, *_) in itertools.pairwise(value):
        if b <= a:
            raise _Problem(f"sizes must increase: {b} comes after {a}")
    for size, send, recv in value:
        if not BYTES.holds(size):
            raise _Problem(f"size {size} is not valid; valid: {BYTES.words}")
        for what, us in (("send", send), ("recv", recv)):
            if not OVERHEAD.holds(us):
                raise _Problem(f"{what} overhead {us!r} at {size} B is not valid; valid: "
                               f"{OVERHEAD.words}")
    return value


def _load_rows(value: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """[[busy_cores, extra_us], ...]: busy cores increasing from 1 to MAX_CORES, bounded."""
    if len(value) > MAX_FACTORS:
        raise _Problem(f"{len(value)} entries is not valid; valid: at most {MAX_FACTORS}")
    for (a, _), (b, _) in itertools.pairwise(value):
        if b <= a:
            raise _Problem(f"busy cores must increase: {b} comes after {a}")
    for cores, us in value:
        if not COUNT.holds(cores):
            raise _Problem(f"busy cores {cores} is not valid; valid: {COUNT.words}")
        if not OVERHEAD.holds(us):
            raise _Problem(f"extra latency {us!r} at {cores} busy cores is not valid; "
                           f"valid: {OVERHEAD.words}")
    return value


def _calibration(value: dict[str, Any]) -> dict[str, Any]:
    """The [calibration] summary: free-form, but only strings, booleans, bounded numbers
    and flat lists of them (cluster_toml writes it back as it is)."""
    for key, item in value.items():
        for v in item if isinstance(item, list) else [item]:
            if isinstance(v, str | bool):
                continue
            if isinstance(v, int | float):
                if CALIBRATION_NUMBER.holds(v):
                    continue
                raise _Below(f"{v!r} is not valid; valid: {CALIBRATION_NUMBER.words}", key)
            raise _Below(f"{v!r} is not valid; valid: a string, a boolean, a number or a "
                         "list of them", key)
    return value


class _Table(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        # Platform errors name the file and key without a key path (tests pin the wording).
        if isinstance(data, dict):
            valid = list(cls.model_fields)
            for key in data:
                if key not in valid:
                    raise _Problem(f"unknown key {key!r}; valid: {', '.join(valid)}"
                                   f"{did_you_mean(key, valid)}")
        return data


Latency = Annotated[float, Field(gt=0), AfterValidator(LATENCY)]
Bandwidth = Annotated[float, Field(gt=0), AfterValidator(BANDWIDTH)]
Overhead = Annotated[float, Field(ge=0), AfterValidator(OVERHEAD)]
Count = Annotated[int, Field(ge=1), AfterValidator(COUNT)]
Bytes = Annotated[int, Field(ge=0), AfterValidator(BYTES)]
Factors = Annotated[list[tuple[Annotated[int, Field(ge=0)], float]],
                    BeforeValidator(_pairs), AfterValidator(_factors)]
OverheadRows = Annotated[list[tuple[Annotated[int, Field(ge=0)], float, float]],
                         BeforeValidator(_pairs), AfterValidator(_overhead_rows)]
LoadRows = Annotated[list[tuple[Annotated[int, Field(ge=1)], float]],
                     BeforeValidator(_pairs), AfterValidator(_load_rows)]


class Level(_Table):
    latency_us: Latency = Field(description="One-way ping-pong latency (µs).")
    bandwidth_mbs: Bandwidth = Field(description="Bandwidth of one flow (MB/s = 1e6 B/s).")
    lat_factor: Factors = Field(default_factory=lambda: [(0, 1.0)], description=(
        "Size-dependent latency multipliers [[from_bytes, factor], ...] (calibrate)."))
    bw_factor: Factors = Field(default_factory=lambda: [(0, 1.0)], description=(
        "Size-dependent bandwidth multipliers [[from_bytes, factor], ...] (calibrate)."))
    # LogGP's o_s / o_r: CPU time a rank spends per message, which serialises a root's
    # sends where link latency alone would let them overlap (calibrate --overheads).
    send_overhead_us: Overhead = Field(0.0, description=(
        "CPU time the sender spends per message at this level (LogGP o_s, µs); part of "
        "latency_us, not added to it."))
    recv_overhead_us: Overhead = Field(0.0, description=(
        "CPU time the receiver spends per message at this level (LogGP o_r, µs); part of "
        "latency_us, not added to it."))
    # On shared memory the eager protocol's copies are CPU work that grows with the size:
    # a root pays each message's copy before the next leaves (calibrate --overhead-share).
    overhead_per_size: OverheadRows = Field(default_factory=list, description=(
        "Size-dependent overheads [[from_bytes, send_us, recv_us], ...], interpolated "
        "linearly between entries; the first entry (0 bytes) must equal send_overhead_us "
        "and recv_overhead_us. Empty: the two constants at every size."))

    # A ping-pong has two busy cores; a collective keeps every core of the node busy, and a
    # message's cache lines then cross a loaded coherence fabric (calibrate --load-barrier).
    load_latency_us: LoadRows = Field(default_factory=list, description=(
        "Latency added to every message of this level by the number of busy cores (ranks) "
        "on the sender's node, [[busy_cores, extra_us], ...], linear between entries, 0 "
        "below the first and the last entry's beyond it. Empty: none (a ping-pong's)."))

    @model_validator(mode="after")
    def _overheads_within_latency(self) -> Level:
        total = self.send_overhead_us + self.recv_overhead_us
        if total >= self.latency_us:
            raise _Problem(f"send_overhead_us + recv_overhead_us = {total:g} is not below "
                           f"latency_us ({self.latency_us:g}); the overheads are part of the "
                           "ping-pong latency")
        rows = self.overhead_per_size
        if rows and (rows[0][1], rows[0][2]) != (self.send_overhead_us, self.recv_overhead_us):
            raise _Problem(f"overhead_per_size starts with {rows[0][1]:g}/{rows[0][2]:g} µs but "
                           f"send_overhead_us/recv_overhead_us are {self.send_overhead_us:g}/"
                           f"{self.recv_overhead_us:g}; valid: the same values at 0 bytes")
        return self

    def overheads(self) -> bool:
        return (self.send_overhead_us > 0 or self.recv_overhead_us > 0
                or any(s > 0 or r > 0 for _, s, r in self.overhead_per_size))

    def overhead_at(self, size: int) -> tuple[float, float]:
        """(o_s, o_r) in µs for a message of `size` bytes, as the platform loader charges
        them (linear between entries, the last entry's beyond it)."""
        rows = self.overhead_per_size
        if not rows:
            return self.send_overhead_us, self.recv_overhead_us
        for (a, sa, ra), (b, sb, rb) in itertools.pairwise(rows):
            if a <= size < b:
                w = (size - a) / (b - a)
                return sa + w * (sb - sa), ra + w * (rb - ra)
        return rows[-1][1], rows[-1][2]

    def load_at(self, busy: int) -> float:
        """Extra latency (µs) of a message of this level when `busy` cores of the sender's
        node run a rank (the loader's rule: 0 below the first entry)."""
        rows = self.load_latency_us
        if not rows or busy < rows[0][0]:
            return 0.0
        for (a, ea), (b, eb) in itertools.pairwise(rows):
            if a <= busy < b:
                return ea + (busy - a) / (b - a) * (eb - ea)
        return rows[-1][1]

    def slowdown_at(self, busy: int) -> float:
        """How many times longer this level's bytes take when `busy` cores of the sender's
        node run a rank ([memory] load_bandwidth): the latency grows by load_at(busy) over
        latency_us, and a copy moves its cache lines at that latency (Little's law: bytes
        in flight / latency), so its bandwidth falls by the same ratio."""
        return 1.0 + self.load_at(busy) / self.latency_us

    def calibrated(self) -> bool:
        """True when a factor differs from 1 or overheads or load terms are set (the
        platform then needs collbench's loader)."""
        return self.overheads() or bool(self.load_latency_us) or any(
            f != 1.0 for _, f in (*self.lat_factor, *self.bw_factor))


class Levels(_Table):
    intra_socket: Level
    inter_socket: Level | None = None
    inter_package: Level | None = None
    inter_node: Level | None = None


class Topology(_Table):
    kind: Annotated[str, _one_of(TOPOLOGIES)] = "flat"
    nodes_per_leaf: Count | None = Field(
        None, description="fat-tree: nodes under one leaf switch.")
    oversubscription: Annotated[float, Field(ge=1), AfterValidator(OVERSUBSCRIPTION)] = Field(
        1.0, description="fat-tree: leaf down/up bandwidth ratio (1 = full bisection).")
    hop_latency_us: Overhead = Field(
        0.1, description="fat-tree: latency added per leaf-spine hop (each way).")


class Smpi(_Table):
    eager_threshold: Bytes = Field(
        0, description="Messages below this size go eagerly, without waiting for the "
                       "receive (smpi/async-small-thresh); 0 = SMPI's default. In SMPI 3.32 "
                       "an algorithm sending one peer messages on both sides of it can "
                       "deadlock (docs/simgrid.md).")
    rendezvous_bytes: Bytes = Field(
        0, description="Blocking sends of this many bytes or more wait for their receive, "
                       "as an MPI's rendezvous protocol does (Open MPI's shared-memory "
                       "eager limit: 4096; smpi/send-is-detached-thresh, the same threshold "
                       "as `model predict --network mpi`); 0 = SMPI's default, 65536.")
    cfg: list[Annotated[str, AfterValidator(_cfg_item)]] = Field(default_factory=list)


class Memory(_Table):
    """How concurrent transfers of one node share its hardware (docs/simgrid.md, "Sharing").

    A ping-pong has one flow at a time, so it cannot show these; they shape fan-outs and
    fan-ins (a linear root, a gather) and every rank of a socket sending at once."""

    receiver_copies: bool = Field(False, description=(
        "Single-copy transfers are made by the receiver (Open MPI's shared memory above its "
        "eager limit: CMA/XPMEM/KNEM; InfiniBand rendezvous reads): the concurrent messages "
        "of one sender do not share its per-core link (each receiver's copy runs on its own "
        "core), while the messages one rank receives still do. false: a sender's outgoing "
        "flows share its link."))
    socket_bandwidth_mbs: Annotated[float, AfterValidator(_optional_bandwidth)] = \
        Field(0.0, description=(
            "Bandwidth (MB/s) every flow leaving one socket shares, and apart from it every "
            "flow entering it (a socket's fabric or memory port: what osu_mbw_mr measures "
            "with every core of a socket sending off it); 0 = no limit beyond each flow's."))
    load_bandwidth: bool = Field(False, description=(
        "A level with a load term (load_latency_us) also loses bandwidth under load: its "
        "bytes take 1 + load_latency / latency_us times longer at that many busy cores of "
        "the sender's node, as a copy moves its cache lines at the message latency "
        "(Little's law; docs/simgrid.md, \"Load\"); 1 at a ping-pong's two busy cores."))
    send_queue: bool = Field(False, description=(
        "A sender's transfers at or above the rendezvous threshold ([smpi] "
        "rendezvous_bytes; SMPI's 65536 when 0) leave one after another, at "
        "socket_bandwidth_mbs within a node (the level's bandwidth when that is 0) and at "
        "the inter_node level's bandwidth between nodes: a root's fan-out completes in "
        "order, as a NIC's send queue and a socket's one port serve it, rather than all "
        "its messages at once at the end."))


class Cluster(_Table):
    name: Annotated[str, AfterValidator(_name)]
    description: str = ""
    source: str = ""
    nodes: Count
    sockets_per_node: Count
    cores_per_socket: Count
    # Sockets grouped into packages (processors): consecutive sockets, this many each;
    # None = one package per node. Messages between packages use levels.inter_package.
    sockets_per_package: Count | None = None
    levels: Levels
    topology: Topology = Field(default_factory=Topology)
    smpi: Smpi = Field(default_factory=Smpi)
    memory: Memory = Field(default_factory=Memory)
    calibration: Annotated[dict[str, Any], AfterValidator(_calibration)] = Field(
        default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> Cluster:
        if self.cores > MAX_CORES:
            raise _Problem(f"nodes × sockets_per_node × cores_per_socket = {self.cores} "
                           f"cores; at most {MAX_CORES} can be simulated")
        if self.sockets_per_node > 1 and self.levels.inter_socket is None:
            raise _Problem("levels.inter_socket: required when sockets_per_node > 1")
        if self.nodes > 1 and self.levels.inter_node is None:
            raise _Problem("levels.inter_node: required when nodes > 1")
        xs, node = self.levels.inter_socket, self.levels.inter_node
        if (self.sockets_per_node > 1 and self.nodes > 1 and xs is not None
                and node is not None and node.latency_us < xs.latency_us):
            raise _Problem(f"levels.inter_node.latency_us: {node.latency_us:g} is below "
                           f"levels.inter_socket.latency_us ({xs.latency_us:g}); a message "
                           "leaving the node also leaves its socket")
        self._packages_consistent()
        if self.topology.kind == "fat-tree" and self.topology.nodes_per_leaf is None:
            raise _Problem("topology.nodes_per_leaf: required for a fat-tree")
        return self

    def _packages_consistent(self) -> None:
        per, sockets = self.sockets_per_package, self.sockets_per_node
        if per is not None and (per > sockets or sockets % per):
            divisors = [d for d in range(1, sockets + 1) if sockets % d == 0]
            shown = ", ".join(map(str, divisors[:12])) + (", ..." if len(divisors) > 12 else "")
            raise _Problem(f"sockets_per_package: {per} does not divide sockets_per_node "
                           f"({sockets}); valid: {shown}")
        pkg, xs = self.levels.inter_package, self.levels.inter_socket
        if pkg is None:
            return
        if self.packages_per_node < 2:
            raise _Problem("levels.inter_package: needs packages: set sockets_per_package "
                           f"below sockets_per_node ({sockets}), or remove the level")
        if xs is not None and pkg.latency_us < xs.latency_us:
            raise _Problem(f"levels.inter_package.latency_us: {pkg.latency_us:g} is below "
                           f"levels.inter_socket.latency_us ({xs.latency_us:g}); a message "
                           "between packages also leaves its socket")

    @property
    def packages_per_node(self) -> int:
        return self.sockets_per_node // (self.sockets_per_package or self.sockets_per_node)

    def package_level(self) -> Level | None:
        """The level of two sockets in different packages: inter_package, or inter_socket
        when the platform does not describe it."""
        return self.levels.inter_package or self.levels.inter_socket

    @property
    def cores_per_node(self) -> int:
        return self.sockets_per_node * self.cores_per_socket

    @property
    def cores(self) -> int:
        return self.nodes * self.cores_per_node

    def send_queue_mbs(self, name: str) -> float:
        """How fast (MB/s) one sender's queued sends over level `name` leave ([memory]
        send_queue): the socket's port within a node, the node's card between nodes."""
        level = self.level(name)
        if level is None:
            raise ValueError(f"no {name} level")
        socket = self.memory.socket_bandwidth_mbs
        return level.bandwidth_mbs if name == "inter_node" or not socket else socket

    def level(self, name: str) -> Level | None:
        found: Level | None = getattr(self.levels, name)
        return found

    def calibrated(self) -> bool:
        """True when collbench's loader must install the platform (per-level factors,
        overheads, a load term or a send queue: what SMPI's options cannot say)."""
        return self.memory.send_queue or any(
            lv is not None and lv.calibrated()
            for lv in (self.level(name) for name in PLATFORM_LEVELS))

    def summary(self) -> str:
        topo = self.topology.kind
        if topo == "fat-tree":
            topo += (f" ({self.topology.nodes_per_leaf} nodes/leaf, "
                     f"{self.topology.oversubscription:g}:1)")
        packages = (f" ({self.packages_per_node} packages)" if self.packages_per_node > 1
                    else "")
        return (f"{self.nodes} nodes × {self.sockets_per_node} sockets{packages} × "
                f"{self.cores_per_socket} cores = {self.cores} cores, {topo}")


# --- loading ------------------------------------------------------------------------------

def _builtin_files() -> dict[str, Path]:
    root = resources.files("collbench.platforms").joinpath(_BUILTIN_DIR)
    return {Path(str(p)).stem: Path(str(p)) for p in root.iterdir()
            if str(p).endswith(".toml")}


def builtin_names() -> list[str]:
    return sorted(_builtin_files())


def parse_cluster(text: str, source: str) -> Cluster:
    """A validated Cluster from TOML text; UserError naming the file and key otherwise."""
    data = load_toml(text, source)
    try:
        return Cluster.model_validate(data)
    except ValidationError as e:
        raise UserError(format_validation_error(e, source)) from None


def resolve(ref: str | Path) -> tuple[Path, bool]:
    """(file, is_builtin) for a built-in name or a path to a cluster TOML."""
    builtins = _builtin_files()
    if str(ref) in builtins:
        return builtins[str(ref)], True
    path = Path(ref)
    if path.suffix.lower() == ".xml":
        raise UserError(f"{path}: a SimGrid XML file is not accepted as a platform: placement "
                        "needs the node/socket/core structure; describe the cluster in TOML "
                        "(`collbench platform new FILE.toml`)")
    if not path.is_file():
        names = builtin_names()
        raise UserError(f"platform {str(ref)!r}: neither a built-in nor a file; valid: "
                        f"{', '.join(names)} or a path to a cluster TOML"
                        f"{did_you_mean(str(ref), names)}")
    return path, False


def load_cluster(ref: str | Path) -> tuple[Cluster, str, Path]:
    """(cluster, its TOML text, where it came from) for a built-in name or a file."""
    path, _ = resolve(ref)
    text = read_text(path, "platform")
    return parse_cluster(text, str(path)), text, path
