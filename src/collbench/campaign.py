"""The one way into a campaign: create or resume a results folder, ready to run.

Every command that measures goes through here (`run`, `run --dry-run`, `plan`, `slurm
script`, each `study` stage, `tune --adaptive`, `tune validate`, `rules verify`), so every
one of them checks the same things in the same order:

1. the backend is made from its name (the spec's, or --backend; on resume the stored
   one) and says how to plan for it (its catalogue and core count);
2. a folder that holds a campaign is resumed only when asked, with the same spec, the
   same MPI (what the kernel was built with) and the same recorded settings;
3. a new campaign is planned, its kernel built, its provenance recorded, and the folder
   created; a resumed one takes its stored plan.

`create_folder` is the creation half alone, for folders filled by other means (ingest,
an adaptive replay).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, NamedTuple, TextIO, TypeVar, overload

from collbench.analyse.stability import SIMULATED
from collbench.catalog.load import load_catalog
from collbench.catalog.mpi import MpiInstall
from collbench.catalog.mpi_install import key_of, resolve_mpi
from collbench.errors import UserError
from collbench.kernel.build import KernelBinary
from collbench.launch.base import Backend, BackendSetup, Identity, LaunchBackend, create
from collbench.launch.multi import MultiMpi, mpis_record, multi
from collbench.plan import Launch, Plan, make_plan
from collbench.records import FORMAT_VERSION, mpi_key
from collbench.runner import RowContext, Summary, run_campaign
from collbench.spec import Spec, load_spec, parse_spec
from collbench.store import Store


@dataclass(frozen=True)
class SpecSource:
    """A spec and where it came from: a file, or text a command generated."""

    spec: Spec
    text: str  # stored verbatim as the campaign's spec
    origin: str  # a path or a label, for messages and relative paths

    @staticmethod
    def from_file(path: Path) -> SpecSource:
        spec = load_spec(path)
        return SpecSource(spec, path.read_text(), str(path))

    @staticmethod
    def from_text(text: str, origin: str) -> SpecSource:
        return SpecSource(parse_spec(text, origin), text, origin)


@dataclass(frozen=True)
class Request:
    """How to open: where, and what the caller allows or adds."""

    output: Path
    resume: bool = False  # continue a campaign already in `output`
    retry_failed: bool = False  # with resume: forget failed launches so they run again
    backend: str | None = None  # instead of the spec's run.backend
    platform: str | None = None  # a simulated platform instead of the spec's
    meta: Mapping[str, Any] = field(default_factory=dict)  # recorded; resume needs the same


@dataclass(frozen=True)
class Prepared:
    """A campaign planned for its backend, before any folder exists (plan, dry run)."""

    source: SpecSource
    mpi: MpiInstall
    backend: Backend
    plan: Plan
    mpis: Mapping[str, MpiInstall] = field(default_factory=dict)  # [measure] mpi, by key
    cores: int = 1  # the ranks the machine (allocation, hostfile) holds: trials' limit


B = TypeVar("B", bound=Backend)


@dataclass
class Campaign(Generic[B]):
    store: Store
    source: SpecSource
    plan: Plan
    mpi: MpiInstall
    backend: B
    kernel: KernelBinary
    context: RowContext
    created: bool  # False: resumed

    def todo(self) -> list[Launch]:
        done = self.store.finished()
        return [la for la in self.plan.launches if la.launch_id not in done]

    def run(self, plan: Plan | None = None, progress: TextIO | None = None,
            debug: tuple[str, ...] = (), wrapper: tuple[str, ...] = ()) -> Summary:
        """Run what is not stored yet of this campaign's plan (or of `plan`, launches made
        as the campaign goes, e.g. adaptive rounds)."""
        return run_campaign(self.store, plan or self.plan, self.backend, self.kernel.path,
                            self.context, progress_stream=progress, debug=debug,
                            wrapper=wrapper)


def _say(message: str) -> None:
    print(f"collbench: {message}", file=sys.stderr)


def _one_backend(source: SpecSource, mpi: MpiInstall, request: Request, store: Store,
                 stored: str | None = None, resume: bool = False) -> Backend:
    name = request.backend or stored or source.spec.run.backend
    if source.spec.run.monitoring and name in ("simgrid", "fake"):  # the spec checks its own
        raise UserError(f"--backend {name}: {source.origin} asks run.monitoring, which needs "
                        "Open MPI's pml/monitoring; valid: local, hosts or slurm")
    setup = BackendSetup(source.spec, mpi, source.origin, store, request.platform, resume)
    return create(name, setup, "--backend" if request.backend else
                  f"{source.origin}: run.backend")


def _parts(source: SpecSource, request: Request, store: Store, stored: str | None = None,
           resume: bool = False) -> dict[str, Backend]:
    """[measure] mpi: each MPI resolved (catalog.mpi_install.resolve_mpi) and given a
    backend of its own, by key; {} when the spec names no MPI."""
    parts: dict[str, Backend] = {}
    for i, ref in enumerate(source.spec.measure.mpi or []):
        where = f"{source.origin}: measure.mpi[{i}]"
        mpi = resolve_mpi(ref, where)
        key = key_of(mpi)
        if key in parts:
            raise UserError(f"{where}: {ref!r} is {key}, listed already; list each MPI once")
        parts[key] = _one_backend(source, mpi, request, store, stored, resume)
    return parts


def _backend(source: SpecSource, mpi: MpiInstall, request: Request, store: Store,
             stored: str | None = None, resume: bool = False) -> Backend:
    """The campaign's backend: for `mpi`, or for the MPIs of [measure] mpi (which then
    win over --mpi): the one MPI's own, or a MultiMpi passing each launch to its MPI's."""
    parts = _parts(source, request, store, stored, resume)
    if not parts:
        return _one_backend(source, mpi, request, store, stored, resume)
    if len(parts) == 1:
        return next(iter(parts.values()))
    launching: dict[str, LaunchBackend] = {}
    for key, part in parts.items():
        if not isinstance(part, LaunchBackend):
            raise UserError(f"{source.origin}: measure.mpi: backend {part.name!r} runs one "
                            f"MPI per campaign ({len(parts)} listed: {', '.join(parts)}); "
                            "make one campaign per MPI")
        launching[key] = part
    return multi(launching)


def _keyed(source: SpecSource, backend: Backend) -> dict[str, Backend]:
    """The backend of each MPI of [measure] mpi, by key ({} without [measure] mpi)."""
    if isinstance(backend, MultiMpi):
        return dict(backend.parts)
    return {key_of(backend.mpi): backend} if source.spec.measure.mpi else {}


class _Planned(NamedTuple):
    plan: Plan  # its notes include `skipped`
    cores: int  # the ranks this machine (allocation, hostfile) holds
    skipped: tuple[str, ...]  # placements tried at fewer ranks, one line each


def _plan(source: SpecSource, mpi: MpiInstall, backend: Backend,
          check: bool = True) -> _Planned:
    keyed = _keyed(source, backend)
    simulated = backend.name in SIMULATED  # exact: a few iterations say everything
    if keyed:  # the MPI is a plan dimension: each MPI's own catalogue and forcing
        plannings = {k: b.planning(load_catalog(b.mpi)) for k, b in keyed.items()}
        first = next(iter(plannings.values()))
        plan = make_plan(source.spec, first.catalog, source=source.origin,
                         cores=first.cores,
                         catalogs={k: p.catalog for k, p in plannings.items()},
                         nodes=1 if first.cores is None else None, simulated=simulated)
        planned_cores = first.cores
    else:
        planning = backend.planning(load_catalog(mpi))
        # cores None: the backend runs every rank on this machine, one node (layout checks)
        plan = make_plan(source.spec, planning.catalog, source=source.origin,
                         cores=planning.cores, nodes=1 if planning.cores is None else None,
                         simulated=simulated)
        planned_cores = planning.cores
    cores = planned_cores or os.cpu_count() or 1  # as make_plan counts them
    skipped = check_placements(plan, backend, source.origin, cores) if check else ()
    return _Planned(replace(plan, backend=backend.name, notes=(*plan.notes, *skipped)),
                    cores, skipped)


def _placement(la: Launch) -> tuple[object, ...]:
    return (la.nprocs, la.mapping, la.binding, la.oversubscribe, la.ppn, la.mpi)


def _shown(la: Launch) -> str:
    return f"-np {la.nprocs} --map-by {la.mapping} --bind-to {la.binding}"


class PlacementTrials:
    """The distinct placements to try before anything runs, each at no more ranks than the
    machine (its cores, the allocation's or hostfile's slots) holds: a dry look must not
    start a job of 512 ranks on 2 cores (seconds to minutes of mpirun). The largest count
    that fits, with the same mapping, binding and oversubscription flags, still shows
    whether mpirun accepts them. One note per placement tried smaller: not a refusal, a
    larger machine may run it."""

    def __init__(self) -> None:
        self._seen: set[tuple[object, ...]] = set()
        self._tried: set[tuple[object, ...]] = set()
        self.notes: list[str] = []

    def new(self, launches: Iterable[Launch], cores: int) -> list[tuple[Launch, Launch]]:
        """(the plan's launch, the launch to start) for each placement not tried yet."""
        out = []
        for la in launches:
            if _placement(la) in self._seen:
                continue
            self._seen.add(_placement(la))
            trial = la
            if la.nprocs > cores:
                trial = replace(la, nprocs=cores, ppn=min(la.ppn, cores) if la.ppn else None)
                which = f" ({la.mpi})" if la.mpi else ""
                self.notes.append(f"placement trial of {_shown(la)}{which}: more ranks than "
                                  f"the {cores} cores or slots here; its mapping and binding "
                                  f"were tried at -np {cores}")
            if _placement(trial) not in self._tried:
                self._tried.add(_placement(trial))
                out.append((la, trial))
        return out


def refused(la: Launch, trial: Launch) -> str:
    """The placement a refusal names (and the size it was tried at, when smaller)."""
    smaller = f" (tried at -np {trial.nprocs})" if trial.nprocs != la.nprocs else ""
    return f"{_shown(la)}{smaller}"


def check_placements(plan: Plan, backend: Backend, origin: str,
                     cores: int) -> tuple[str, ...]:
    """Ask the backend about each distinct placement before anything runs: mpirun refuses
    some (Open MPI 5: `--map-by core --bind-to socket`), and a campaign must not learn it
    one failed launch at a time. Returns the notes of placements tried at `cores` ranks."""
    trials = PlacementTrials()
    for la, trial in trials.new(plan.launches, cores):
        problem = backend.placement_problem(trial)
        if problem:
            which = f" ({la.mpi})" if la.mpi else ""
            raise UserError(f"{origin}: measure.map_by/bind_to: the launcher{which} refuses "
                            f"{refused(la, trial)}; {problem}")
    return tuple(trials.notes)


def prepare(source: SpecSource, mpi: MpiInstall, request: Request,
            check_placement: bool = True) -> Prepared:
    """Plan a campaign for its backend without touching the folder (`plan`, dry runs).
    `check_placement=False`: the caller asks the backend about placements itself."""
    backend = _backend(source, mpi, request, Store(request.output))
    workload = source.spec.workload
    if workload is not None and workload.program is not None and \
            workload.program.build is None:
        from collbench.launch.program import find_executable

        find_executable(workload, source.origin)  # one line now, not at the first launch
    mpis = {k: b.mpi for k, b in _keyed(source, backend).items()}
    planned = _plan(source, mpi, backend, check_placement)
    return Prepared(source, next(iter(mpis.values()), mpi), backend, planned.plan, mpis,
                    planned.cores)


def _same_spec(store: Store, source: SpecSource) -> None:
    stored = parse_spec(store.spec_text(), str(store.spec_file))
    if stored.model_dump(mode="json") != source.spec.model_dump(mode="json"):
        raise UserError(f"{source.origin}: differs from the spec stored in {store.root}; "
                        "resume needs the same spec (use another -o folder for a new one)")


def _same_mpi(store: Store, now: Identity, keyed: Mapping[str, Backend]) -> None:
    """Resuming with another MPI would mix two MPIs' numbers in one campaign; with
    [measure] mpi, every MPI is checked (provenance.json's mpis)."""
    if keyed:
        stored_all = store.provenance().get("mpis")
        stored_all = stored_all if isinstance(stored_all, dict) else {}
        for key, backend in keyed.items():
            was_d = stored_all.get(key)
            if not isinstance(was_d, dict) or not isinstance(was_d.get("identity"), dict):
                raise UserError(f"{store.root}: was not run with {key} (it holds "
                                f"{', '.join(stored_all) or 'no per-MPI record'}); resume "
                                "with the same MPIs or use another -o folder")
            was = was_d["identity"]
            _same_identity(store, Identity(str(was.get("implementation")),
                                           str(was.get("version")),
                                           str(was.get("compiler"))),
                           backend.identity(), key)
        return
    stored = store.provenance().get("mpi")
    if not isinstance(stored, dict):
        return
    was = Identity(str(stored.get("implementation")), str(stored.get("version")),
                   str(stored.get("mpicc")))
    _same_identity(store, was, now)


def _same_identity(store: Store, was: Identity, now: Identity, key: str = "") -> None:
    if was != now:
        which = f"{key} " if key else ""
        raise UserError(f"{store.root}: {which}was run with {was.describe()}, not "
                        f"{now.describe()}; resume with the same MPI "
                        f"({'measure.mpi' if key else '--mpi'}) or use another -o folder")


def _same_format(store: Store) -> None:
    """The upgrade step of format 3: rows of an older folder do not say which component
    served them, so new rows beside them would split every point in two."""
    was = store.campaign().get("format_version")
    if was != FORMAT_VERSION and store.launch_files():
        raise UserError(f"{store.root}: format_version {was!r} (its rows do not record the "
                        f"coll component that served them; this collbench writes format "
                        f"{FORMAT_VERSION}); valid: resume it with the collbench that started "
                        "it, or measure again in another -o folder (it stays readable)")


def _same_meta(store: Store, meta: Mapping[str, Any]) -> None:
    stored = store.campaign()
    for key, value in meta.items():
        if stored.get(key) != value:
            raise UserError(f"{store.root}: was started with {key} = {stored.get(key)!r}, "
                            f"not {value!r}; resume with the same settings or use another "
                            "folder")


def _same_launches(store: Store, plan: Plan) -> Plan:
    stored = Plan.from_json(store.plan())
    if [la.to_json() for la in stored.launches] != [la.to_json() for la in plan.launches]:
        raise UserError(f"{store.root}: holds another campaign (its planned launches differ: "
                        "other files, sizes or settings); remove it or choose another folder")
    return stored


def build_binary(backend: Backend, spec: Spec,
                 say: Callable[[str], None] = lambda _: None) -> KernelBinary:
    """What every launch runs: the kernel, or a [workload] spec's program (built with the
    backend's compiler; a missing or non-executable program is one line, before anything
    runs or is created)."""
    start = time.monotonic()
    if spec.workload is not None:
        binary = backend.build_program(spec.workload)
        what = f"the program {spec.workload.label()}"
    else:
        binary = backend.build_kernel()
        what = "the kernel"
    if binary.fresh:
        say(f"built {what} with {binary.compile_command[0]} in "
            f"{time.monotonic() - start:.1f} s")
    return binary


def _build(backend: Backend, spec: Spec, say: Callable[[str], None]) -> KernelBinary:
    return build_binary(backend, spec, say)


def _provenance(backend: Backend, spec: Spec, binary: KernelBinary) -> dict[str, Any]:
    prov = backend.provenance(binary)
    if spec.measure.mpi and "mpis" not in prov:  # one MPI listed: recorded as several are
        prov["mpis"] = mpis_record({key_of(backend.mpi): (backend, binary)})
    if spec.workload is not None:  # the launches ran the program, not the kernel
        from collbench.launch.program import program_record

        prov.pop("kernel", None)
        prov["program"] = program_record(binary, spec.workload)
    return prov


@overload
def open_campaign(source: SpecSource, mpi: MpiInstall, request: Request,
                  plan: Plan | None = None,
                  say: Callable[[str], None] = ...) -> Campaign[Backend]: ...


@overload
def open_campaign(source: SpecSource, mpi: MpiInstall, request: Request,
                  plan: Plan | None = None, say: Callable[[str], None] = ..., *,
                  kind: type[B]) -> Campaign[B]: ...


def open_campaign(source: SpecSource, mpi: MpiInstall, request: Request,
                  plan: Plan | None = None, say: Callable[[str], None] = _say,
                  kind: type[Backend] = Backend) -> Campaign[Any]:
    """Create or resume the campaign in request.output, ready to run.

    `plan` is a plan built in code (tune validate, rules verify, adaptive tuning): it is
    stored instead of one made from the spec, and a resumed folder must hold the same
    launches. `kind` is the kind of backend the caller needs (e.g. a batch backend that
    writes scripts); another kind is refused before anything is written."""
    store = Store(request.output)
    store.lock()  # one writer per folder: a second run, study or ingest gets a clear error
    try:
        return _open(store, source, mpi, request, plan, say, kind)
    except BaseException:
        store.abandon()  # a folder this call made and filled with nothing goes again
        raise


def _open(store: Store, source: SpecSource, mpi: MpiInstall, request: Request,
          plan: Plan | None, say: Callable[[str], None], kind: type[Backend]) -> Campaign[Any]:
    resuming = store.exists()
    stored_backend = None
    if resuming:
        if not request.resume:
            raise UserError(f"{store.root}: already holds campaign "
                            f"{store.campaign().get('name')!r}; add --resume to continue it, "
                            "or choose another -o folder")
        _same_format(store)
        _same_spec(store, source)
        _same_meta(store, request.meta)
        stored_backend = str(store.campaign().get("backend") or "") or None
    backend = _backend(source, mpi, request, store, stored_backend, resuming)
    if not isinstance(backend, kind):
        raise UserError(f"backend {backend.name!r} cannot do this (it is not a "
                        f"{kind.__name__})")
    if resuming:
        _same_mpi(store, backend.identity(), _keyed(source, backend))
        plan = _same_launches(store, plan) if plan is not None else \
            Plan.from_json(store.plan())
        if request.retry_failed:
            store.forget(lid for lid, st in store.finished().items() if st != "ok")
    else:
        if plan is None:
            planned = _plan(source, mpi, backend)
            plan = planned.plan
            for note in planned.skipped:
                say(f"skipped: {note}")
        plan = replace(plan, backend=backend.name)
    kernel = _build(backend, source.spec, say)
    if not resuming:
        create_folder(store, {"name": plan.campaign, "seed": plan.seed,
                              "backend": backend.name, "spec_source": source.origin,
                              **backend.campaign_meta(), **request.meta},
                      source.text, plan.to_json(), _provenance(backend, source.spec, kernel))
        backend.created(store)
    backend.ready(store)
    return Campaign(store, source, plan, backend.mpi, backend, kernel,
                    _row_context(store, plan, source, backend), created=not resuming)


def _row_context(store: Store, plan: Plan, source: SpecSource,
                 backend: Backend) -> RowContext:
    """What every row of the campaign says about it: the MPI as its key (records format 2;
    a format 1 folder resumed goes on with the implementation alone, as its rows say)."""
    def mpi_column(ident: Identity) -> str:
        if store.campaign().get("format_version") == 1:
            return ident.implementation
        return mpi_key(ident.implementation, ident.version)

    ident = backend.identity()
    per_mpi = {k: (mpi_column(b.identity()), b.identity().version)
               for k, b in _keyed(source, backend).items()}
    return RowContext(plan.campaign, backend.name, mpi_column(ident), ident.version, per_mpi)


def create_folder(store: Store, meta: Mapping[str, Any], spec_text: str,
                  plan: Mapping[str, Any], provenance: dict[str, Any]) -> Store:
    """Create a campaign folder (the creation half of the opener, for ingest and replays)."""
    store.create(dict(meta), spec_text, dict(plan), provenance)
    return store
