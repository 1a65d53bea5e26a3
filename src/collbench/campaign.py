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

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TextIO, TypeVar, overload

from collbench.catalog.load import load_catalog
from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError
from collbench.kernel.build import KernelBinary
from collbench.launch.base import Backend, BackendSetup, Identity, create
from collbench.plan import Launch, Plan, make_plan
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


def _backend(source: SpecSource, mpi: MpiInstall, request: Request, store: Store,
             stored: str | None = None, resume: bool = False) -> Backend:
    name = request.backend or stored or source.spec.run.backend
    setup = BackendSetup(source.spec, mpi, source.origin, store, request.platform, resume)
    return create(name, setup, "--backend" if request.backend else
                  f"{source.origin}: run.backend")


def _plan(source: SpecSource, mpi: MpiInstall, backend: Backend, check: bool = True) -> Plan:
    planning = backend.planning(load_catalog(mpi))
    plan = make_plan(source.spec, planning.catalog, source=source.origin, cores=planning.cores)
    if check:
        check_placements(plan, backend, source.origin)
    return replace(plan, backend=backend.name)


def check_placements(plan: Plan, backend: Backend, origin: str) -> None:
    """Ask the backend about each distinct placement before anything runs: mpirun refuses
    some (Open MPI 5: `--map-by core --bind-to socket`), and a campaign must not learn it
    one failed launch at a time."""
    seen: set[tuple[object, ...]] = set()
    for la in plan.launches:
        key = (la.nprocs, la.mapping, la.binding, la.oversubscribe)
        if key in seen:
            continue
        seen.add(key)
        problem = backend.placement_problem(la)
        if problem:
            raise UserError(f"{origin}: measure.map_by/bind_to: the launcher refuses -np "
                            f"{la.nprocs} --map-by {la.mapping} --bind-to {la.binding}; "
                            f"{problem}")


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
    return Prepared(source, mpi, backend, _plan(source, mpi, backend, check_placement))


def _same_spec(store: Store, source: SpecSource) -> None:
    stored = parse_spec(store.spec_text(), str(store.spec_file))
    if stored.model_dump(mode="json") != source.spec.model_dump(mode="json"):
        raise UserError(f"{source.origin}: differs from the spec stored in {store.root}; "
                        "resume needs the same spec (use another -o folder for a new one)")


def _same_mpi(store: Store, now: Identity) -> None:
    """Resuming with another MPI would mix two MPIs' numbers in one campaign."""
    stored = store.provenance().get("mpi")
    if not isinstance(stored, dict):
        return
    was = Identity(str(stored.get("implementation")), str(stored.get("version")),
                   str(stored.get("mpicc")))
    if was != now:
        raise UserError(f"{store.root}: was run with {was.describe()}, not {now.describe()}; "
                        "resume with the same MPI (--mpi) or use another -o folder")


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
        _same_spec(store, source)
        _same_meta(store, request.meta)
        stored_backend = str(store.campaign().get("backend") or "") or None
    backend = _backend(source, mpi, request, store, stored_backend, resuming)
    if not isinstance(backend, kind):
        raise UserError(f"backend {backend.name!r} cannot do this (it is not a "
                        f"{kind.__name__})")
    if resuming:
        _same_mpi(store, backend.identity())
        plan = _same_launches(store, plan) if plan is not None else \
            Plan.from_json(store.plan())
        if request.retry_failed:
            store.forget(lid for lid, st in store.finished().items() if st != "ok")
    else:
        plan = replace(plan or _plan(source, mpi, backend), backend=backend.name)
    kernel = _build(backend, source.spec, say)
    if not resuming:
        create_folder(store, {"name": plan.campaign, "seed": plan.seed,
                              "backend": backend.name, "spec_source": source.origin,
                              **backend.campaign_meta(), **request.meta},
                      source.text, plan.to_json(), _provenance(backend, source.spec, kernel))
        backend.created(store)
    backend.ready(store)
    ident = backend.identity()
    return Campaign(store, source, plan, mpi, backend, kernel,
                    RowContext(plan.campaign, backend.name, ident.implementation,
                               ident.version), created=not resuming)


def create_folder(store: Store, meta: Mapping[str, Any], spec_text: str,
                  plan: Mapping[str, Any], provenance: dict[str, Any]) -> Store:
    """Create a campaign folder (the creation half of the opener, for ingest and replays)."""
    store.create(dict(meta), spec_text, dict(plan), provenance)
    return store
