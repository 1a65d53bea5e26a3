"""The plan's data: points, launches, the plan, its format history and limits."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from collbench.catalog.collectives import COLLECTIVES, OSU_BW_WINDOW, Kind, RulesBytes
from collbench.errors import UserError
from collbench.plan import estimate

PLAN_FORMAT: Final = 3
# What each plan.json format holds; a new format adds a line and a reader for the old one.
PLAN_HISTORY: Final[dict[int, str]] = {
    1: "campaign, seed, backend, launches: [{launch_id, repetition, nprocs, mapping, "
       "binding, oversubscribe, mca, env, swept, selection, timeout_s, validate, samples, "
       "points: [{collective, algorithm, algorithm_id, segsize, fanout, size_bytes, "
       "iterations, warmup}]}]; non-blocking points (ibcast, ...) add test_calls, compute, "
       "hide_steps (absent on the others); a workload launch adds program: {name, args, "
       "params, metrics, primary} (absent on kernel launches)",
    2: "as 1; a launch of a campaign with [measure] mpi adds mpi, the key of the MPI it "
       "runs (openmpi-4.1.8; absent otherwise); "
       "a launch of a campaign with [measure] ppn adds ppn, its ranks per node (absent "
       "otherwise); blocking collective points add timing: \"completion\" ([measure] timing; "
       "absent: osu) and precision, max_iterations, max_seconds ([measure] precision; "
       "absent: fixed counts); a workload launch whose program prints a row per message "
       "size (the plogp app) has one point per size and adds lines: true to its program "
       "(absent otherwise). Format 1 plans are read as they are.",
    3: "as 2; a launch of a campaign with [measure] components adds component, the coll "
       "component it asks Open MPI for (absent: default, Open MPI's own choice). Format 1 "
       "and 2 plans are read as they are.",
}
READABLE_PLAN_FORMATS: Final = (1, 2, 3)
MPIT: Final = "mpit"
LAUNCH: Final = "launch"
NONE: Final = "none"

# Rough cost model of one iteration (Hockney): latency and bandwidth of one step, fitted
# with the wall-time model around it (start-up, per-point cost, oversubscription, SimGrid:
# plan/estimate.py) on an idle machine: shared memory, np = 2.
ALPHA_S: Final = 0.45e-6
BETA_BYTES_PER_S: Final = 10e9


@dataclass(frozen=True)
class Point:
    collective: str
    algorithm: str  # as the MPI spells it; "default" = the MPI's own choice
    algorithm_id: int | None  # Open MPI id (0 = default); None where ids do not exist
    segsize: int  # 0 = unsegmented / MPI default
    fanout: int  # 0 = MPI default
    size_bytes: int
    iterations: int
    warmup: int
    # Non-blocking collectives only (None/0 on the others): the kernel's job-line options.
    test_calls: int | None = None  # MPI_Test calls in the compute phase (OSU -t)
    compute: str | None = None  # "auto", "<v>us" or "<v>x"
    hide_steps: int = 0  # steps of the max-hideable-compute sweep (0: none)
    # Blocking collectives: "completion" also runs the synchronised-start loop.
    timing: str = "osu"
    # Blocking collectives: iterate until the median's CI is within +-precision (None: the
    # fixed `iterations`, which is then the first batch), at most max_* of each.
    precision: float | None = None
    max_iterations: int = 0
    max_seconds: float = 0.0

    def job_line(self) -> str:
        line = (f"{self.collective} {self.algorithm_id or 0} {self.segsize} {self.fanout} "
                f"{self.size_bytes} {self.iterations} {self.warmup}")
        if self.timing != "osu":
            line += f" timing={self.timing}"
        if self.precision is not None:
            line += (f" precision={self.precision:.6g} max_iterations={self.max_iterations} "
                     f"max_seconds={self.max_seconds:.6g}")
        if self.test_calls is None:
            return line
        return (f"{line} test_calls={self.test_calls} compute={self.compute or 'auto'} "
                f"hide_steps={self.hide_steps}")

    def to_json(self) -> dict[str, Any]:
        """As stored in plan.json: blocking points without the non-blocking keys."""
        d = dict(vars(self))  # every field is a scalar; asdict's deep copy cost 40 ms a run
        if self.timing == "osu":  # plan.json as before completion timing existed
            del d["timing"]
        if self.precision is None:  # and before precision-driven iterations
            for key in ("precision", "max_iterations", "max_seconds"):
                del d[key]
        if self.test_calls is None:
            for key in ("test_calls", "compute", "hide_steps"):
                del d[key]
        return d

    def work_seconds(self, nprocs: int) -> float:
        """Modelled time of the whole point: (warm-up + iterations) × one iteration; a
        non-blocking point runs the pure loop, the overlapped loop (pure + compute) and
        hide_steps more overlapped loops (compute k/K of the pure time, on average (K+1)/2K)."""
        comm = self.modelled_seconds(nprocs)
        per = comm
        if self.test_calls is not None:
            k = self.hide_steps
            per = (2 + k) * comm + _compute_seconds(self.compute, comm) + (
                comm * (k + 1) / 2 if k else 0.0)
        return (self.iterations + self.warmup) * per

    def relative_compute_seconds(self, nprocs: int) -> float:
        """The part of work_seconds() that is dummy compute sized to the pure time the
        kernel measures (compute auto or <v>x, the hide sweep): on a busy machine that time
        is already slowed, and the compute is slowed again when it runs."""
        if self.test_calls is None:
            return 0.0
        comm = self.modelled_seconds(nprocs)
        k = self.hide_steps
        sized = 0.0 if (self.compute or "auto").endswith("us") else \
            _compute_seconds(self.compute, comm)
        return (self.iterations + self.warmup) * (sized + (comm * (k + 1) / 2 if k else 0.0))

    def modelled_seconds(self, nprocs: int) -> float:
        """Modelled time of one iteration: α·⌈log2 P⌉ + bytes/β, plus OSU's barrier.

        A rough planning aid, not a prediction: bytes is the message size, times P for the
        operations where every rank's block travels (gather, scatter, all-to-all, ...).
        """
        steps = max(1, math.ceil(math.log2(max(nprocs, 2))))
        coll = COLLECTIVES.get(self.collective)
        m = self.size_bytes
        if coll is not None and coll.kind is Kind.P2P:
            if self.collective in ("bw", "mbw_mr"):
                return OSU_BW_WINDOW * m / BETA_BYTES_PER_S + 2 * ALPHA_S
            return 2 * (ALPHA_S + m / BETA_BYTES_PER_S)  # ping-pong round trip
        spread = coll is not None and (coll.kind is Kind.ALL or coll.rules_bytes in (
            RulesBytes.TIMES_P, RulesBytes.SUM_COUNTS))
        volume = m * nprocs if spread else m
        return 2 * ALPHA_S * steps + volume / BETA_BYTES_PER_S


def _compute_seconds(compute: str | None, comm_s: float) -> float:
    """The dummy compute of one overlapped iteration: auto = the pure time, <v>x, <v>us."""
    if compute is None or compute == "auto":
        return comm_s
    if compute.endswith("x"):
        return float(compute[:-1]) * comm_s
    return float(compute.removesuffix("us")) * 1e-6


@dataclass(frozen=True)
class ProgramRun:
    """What a workload launch runs instead of the kernel (spec [workload]): the program's
    arguments for this launch, and how its output becomes a row."""

    name: str  # the row's collective column
    args: tuple[str, ...]  # after the executable, placeholders substituted
    params: tuple[tuple[str, str], ...]  # this launch's workload.params, as text, sorted
    metrics: tuple[tuple[str, str], ...] = ()  # (name, regex); empty: a JSON object line
    primary: str | None = None  # the metric stored as avg_us (None: the first usual one)
    lines: bool = False  # a JSON line per point (message size), in order: a row each

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "args": list(self.args), "params": dict(self.params),
                "metrics": dict(self.metrics), "primary": self.primary,
                **({"lines": True} if self.lines else {})}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> ProgramRun:
        return ProgramRun(str(data["name"]), tuple(str(a) for a in data["args"]),
                          tuple(sorted((str(k), str(v)) for k, v in data["params"].items())),
                          tuple((str(k), str(v)) for k, v in data["metrics"].items()),
                          None if data["primary"] is None else str(data["primary"]),
                          data.get("lines") is True)


@dataclass(frozen=True)
class Launch:
    launch_id: str  # f"{index:04d}-{sha256(content)[:8]}", index = position in run order
    repetition: int  # 0-based
    nprocs: int
    mapping: str  # --map-by
    binding: str  # --bind-to
    oversubscribe: bool
    mca: tuple[tuple[str, str], ...]  # every --mca pair: fixed + swept + forcing, sorted
    env: tuple[tuple[str, str], ...]  # extra environment (MPICH forcing), sorted
    swept: tuple[tuple[str, str], ...]  # this launch's mca.sweep values, sorted
    selection: str  # "mpit" | "launch" | "none"
    points: tuple[Point, ...]
    timeout_s: float
    validate: bool
    samples: bool
    program: ProgramRun | None = None  # a workload launch: this program, not the kernel
    mpi: str | None = None  # [measure] mpi: the key of the MPI this launch runs with
    ppn: int | None = None  # [measure] ppn: ranks per node (None: the launcher fills slots)
    component: str | None = None  # [measure] components: the coll component asked for
    monitoring: bool = False  # [run] monitoring: Open MPI pml/monitoring counts per point

    def job_lines(self) -> list[str]:
        """Kernel job file: `collective algorithm_id segsize fanout size iterations warmup`."""
        return [p.job_line() for p in self.points]

    def estimate_seconds(self, startup_s: float | None = None, simulated: bool = False
                         ) -> float:
        """Modelled wall time (plan/estimate.py); `simulated`: under SimGrid."""
        return estimate.launch_seconds(self.nprocs, self.oversubscribe, self.points, simulated,
                                       startup_s)

    def point_seconds(self, simulated: bool = False) -> list[float]:
        """Modelled wall time of each point, in order (the live ETA moves by points)."""
        return [estimate.point_seconds(p, self.nprocs, simulated) for p in self.points]

    def to_json(self) -> dict[str, Any]:
        return {
            "launch_id": self.launch_id, "repetition": self.repetition, "nprocs": self.nprocs,
            "mapping": self.mapping, "binding": self.binding,
            "oversubscribe": self.oversubscribe, "mca": dict(self.mca), "env": dict(self.env),
            "swept": dict(self.swept), "selection": self.selection,
            "timeout_s": self.timeout_s, "validate": self.validate, "samples": self.samples,
            "points": [p.to_json() for p in self.points],
            **({"program": self.program.to_json()} if self.program is not None else {}),
            **({"mpi": self.mpi} if self.mpi is not None else {}),
            **({"ppn": self.ppn} if self.ppn is not None else {}),
            **({"component": self.component} if self.component is not None else {}),
            **({"monitoring": True} if self.monitoring else {}),  # ids unchanged without
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Launch:
        def pairs(key: str) -> tuple[tuple[str, str], ...]:
            return tuple(sorted((str(k), str(v)) for k, v in data[key].items()))

        return Launch(
            launch_id=str(data["launch_id"]), repetition=int(data["repetition"]),
            nprocs=int(data["nprocs"]), mapping=str(data["mapping"]),
            binding=str(data["binding"]), oversubscribe=bool(data["oversubscribe"]),
            mca=pairs("mca"), env=pairs("env"), swept=pairs("swept"),
            selection=str(data["selection"]), timeout_s=float(data["timeout_s"]),
            validate=bool(data["validate"]), samples=bool(data["samples"]),
            points=tuple(Point(**p) for p in data["points"]),
            program=ProgramRun.from_json(data["program"]) if "program" in data else None,
            mpi=str(data["mpi"]) if data.get("mpi") is not None else None,
            ppn=int(data["ppn"]) if data.get("ppn") is not None else None,
            component=str(data["component"]) if data.get("component") is not None else None,
            monitoring=bool(data.get("monitoring", False)),
        )


@dataclass(frozen=True)
class Plan:
    campaign: str
    seed: int
    backend: str
    launches: tuple[Launch, ...]
    # What planning left out and why (not stored: the same spec on the same layout says it).
    notes: tuple[str, ...] = field(default=(), compare=False)

    def points_total(self) -> int:
        return sum(len(launch.points) for launch in self.launches)

    @property
    def simulated(self) -> bool:
        return self.backend in estimate.SIMULATED

    def estimate_seconds(self, startup_s: float | None = None) -> float:
        """Modelled wall time of the whole run: collbench's own start
        (estimate.campaign_seconds) and every launch (Launch.estimate_seconds)."""
        launches = sum(la.estimate_seconds(startup_s, self.simulated) for la in self.launches)
        return (estimate.campaign_seconds() if self.launches else 0.0) + launches

    def to_json(self) -> dict[str, Any]:
        return {"format": PLAN_FORMAT, "campaign": self.campaign, "seed": self.seed,
                "backend": self.backend, "launches": [x.to_json() for x in self.launches]}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Plan:
        """The plan recorded by to_json; UserError when it is not one."""
        if data.get("format") not in READABLE_PLAN_FORMATS:
            raise UserError(f"plan format {data.get('format')!r} is not supported "
                            f"(valid: {', '.join(map(str, READABLE_PLAN_FORMATS))})")
        try:
            return Plan(str(data["campaign"]), int(data["seed"]), str(data["backend"]),
                        tuple(Launch.from_json(x) for x in data["launches"]))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise UserError(f"malformed plan: {type(e).__name__}: {e}") from None

# A plan is expanded in memory and stored as JSON: refuse one too large before expanding.
MAX_POINTS: Final = 2_000_000
MAX_LAUNCHES: Final = 200_000
