"""Tidy rows (records.make_row) of one parsed OSU or IMB file, with what the command line
and the file's recorded command say about the run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from collbench.catalog.algorithms import Catalog
from collbench.catalog.forcing import is_forcing_env, is_forcing_mca
from collbench.errors import UserError
from collbench.ingest.common import NONBLOCKING_NAMES, ParsedFile
from collbench.ingest.forced import forced_ids, merged_mca, mpich_forced, recorded_mca
from collbench.ingest.options import IngestOptions
from collbench.ingest.osu import TWO_PROCESS_TESTS, command_options
from collbench.records import make_row

# Header lines that describe the experiment (they go into params, which analyses group
# by); the rest (date, machine, calling sequence) describes one run and goes to the meta.
_IMB_PARAMS: Final = ("suite", "imb_version", "MPI Version", "MPI Thread Environment",
                      "MPI_Datatype", "MPI_Datatype for reductions", "MPI_Op", "multi_groups")



def _osu_settings(parsed: ParsedFile, opts: IngestOptions, name: str) -> dict[str, int]:
    """test_calls, iterations and warmup of an OSU run: the `### cmd:` line's, else --param.
    A recorded osu_i* command without -t (and no --param test_calls) ran OSU's default, 0
    MPI_Test calls; without any of them test_calls is unknown and left out."""
    given = dict(opts.params)
    if parsed.kind != "osu":
        if given:
            raise UserError(f"{name}: --param {next(iter(given))} is for OSU output; IMB "
                            "files say their own repetitions")
        return {}
    recorded = command_options(parsed.command, name)
    for key, value in given.items():
        if key in recorded and recorded[key] != value:
            raise UserError(f"{name}: --param {key}={value} contradicts the recorded command "
                            f"({key} = {recorded[key]}: {parsed.command})")
    implied = {"test_calls": 0} if parsed.command and "osu_i" in parsed.command else {}
    settings = {**implied, **given, **recorded}
    if "test_calls" in settings and not any(r.collective in NONBLOCKING_NAMES
                                            for r in parsed.rows):
        raise UserError(f"{name}: test_calls is for non-blocking OSU benchmarks (osu_i*); "
                        "this file holds " + ", ".join(dict.fromkeys(
                            r.collective for r in parsed.rows)))
    return settings


@dataclass(frozen=True)
class _Launch:
    """Launch-level facts of one file: process counts and placement."""

    nprocs: int
    nodes: int
    ppn: int


def _launch(parsed: ParsedFile, opts: IngestOptions, name: str) -> _Launch:
    if parsed.kind == "osu":
        if opts.nprocs is None:
            raise UserError(f"{name}: OSU output does not say how many processes ran; give "
                            "--nprocs")
        two = sorted({r.collective for r in parsed.rows} & set(TWO_PROCESS_TESTS))
        if two and opts.nprocs != 2:
            raise UserError(f"{name}: --nprocs {opts.nprocs} is not valid for osu_{two[0]}, "
                            "which runs with exactly 2 processes")
        nprocs = opts.nprocs
    else:
        world = parsed.world_nprocs
        if opts.nprocs is not None and world is not None and opts.nprocs != world:
            raise UserError(f"{name}: --nprocs {opts.nprocs} disagrees with the file: its "
                            f"'#processes' lines make a job of {world} processes")
        found = opts.nprocs or world
        if found is None:
            raise UserError(f"{name}: the file has no '#processes' line; give --nprocs")
        nprocs = found
    if opts.nodes > nprocs:
        raise UserError(f"--nodes: {opts.nodes} nodes for {nprocs} processes is not valid")
    ppn = opts.ppn
    if ppn is None:
        if nprocs % opts.nodes:
            raise UserError(f"--ppn: {nprocs} processes do not spread evenly over "
                            f"{opts.nodes} nodes; give --ppn")
        ppn = nprocs // opts.nodes
    elif ppn * opts.nodes < nprocs:
        raise UserError(f"--ppn: {ppn} per node × {opts.nodes} nodes holds fewer than the "
                        f"{nprocs} processes")
    return _Launch(nprocs, opts.nodes, ppn)


def _algorithm(collective: str, opts: IngestOptions, forced: dict[str, tuple[str, int]],
               by_name: dict[str, str], catalog: Catalog | None,
               name: str) -> tuple[str, int | None, str]:
    """(name, id, selection) of the algorithm that produced a row: what --algorithm says,
    else what the run forced (an Open MPI id or an MPICH name), named with the table of
    the file's MPI version; never `default` for a forced run."""
    key, ident = forced.get(collective, ("", None))
    named = by_name.get(collective)
    selection = "none" if ident is None and named is None else "launch"
    where = f"{name}: --algorithm" if opts.algorithm is not None else \
        f"{name}: {key or 'MPIR_CVAR_' + collective.upper() + '_INTRA_ALGORITHM'}"
    ref: str | int | None = opts.algorithm if opts.algorithm is not None else \
        (ident if ident is not None else named)
    if opts.algorithm is not None and opts.algorithm.strip().isdigit():
        ref = int(opts.algorithm)
    if ref is None or ref == 0 or (isinstance(ref, str) and ref.strip().lower() == "default"):
        # `--algorithm default` over a forced id: the user knows Open MPI ignored it.
        return "default", 0 if catalog is None or catalog.implementation == "openmpi" \
            else None, selection
    if catalog is None:
        if opts.algorithm is None:
            raise UserError(f"{where} {ref}: collbench has no algorithm table for "
                            f"{opts.mpi} {opts.mpi_version} to name it; give --mpi and "
                            "--mpi-version of the run, or name what ran with --algorithm")
        return opts.algorithm, ident, selection
    try:
        alg = catalog.resolve(collective, ref, where)
    except UserError as e:
        if ident is not None and opts.algorithm is None:
            raise UserError(f"{e}; Open MPI ignores unknown ids and runs its default, so "
                            "name what ran with --algorithm") from None
        raise
    if ident is not None and alg.id is not None and alg.id != ident:
        raise UserError(f"{where} {opts.algorithm}: the run forced {key} {ident}, which is "
                        f"{_name_of(catalog, collective, ident)} in {catalog.implementation} "
                        f"{catalog.version}")
    return alg.name, alg.id, selection


def _name_of(catalog: Catalog, collective: str, ident: int) -> str:
    return next((repr(a.name) for a in catalog.of(collective) if a.id == ident),
                "no algorithm")


def build_rows(parsed: ParsedFile, opts: IngestOptions, campaign: str, launch_id: str,
               name: str, catalog: Catalog | None = None) -> list[dict[str, Any]]:
    """Tidy rows of one parsed file (records.make_row)."""
    rows = parsed.rows
    if opts.collective is not None:  # for IMB a filter; OSU already agreed with the title
        rows = [r for r in rows if r.collective == opts.collective]
        if not rows:
            have = ", ".join(dict.fromkeys(r.collective for r in parsed.rows))
            raise UserError(f"{name}: no {opts.collective} results; the file has: {have}")
    collectives = list(dict.fromkeys(r.collective for r in rows))
    if opts.algorithm not in (None, "default") and len(collectives) > 1:
        raise UserError(f"{name}: --algorithm {opts.algorithm!r} would name the algorithm of "
                        f"every benchmark in the file ({', '.join(collectives)}); add "
                        "--collective to pick one")
    launch = _launch(parsed, opts, name)
    mca = merged_mca(opts.mca, recorded_mca(parsed.command), name)
    ids, segsizes, fanouts = forced_ids(mca)
    by_name = mpich_forced(mca)
    # Forcing keys are not parameters (catalog/forcing.py): the algorithm columns say what
    # ran, so a forced file and the default run of the same experiment compare.
    params_mca = {k: v for k, v in sorted(mca.items())
                  if not is_forcing_mca(k) and not is_forcing_env(k)}
    suite = _suite_params(parsed, launch)
    settings = _osu_settings(parsed, opts, name)
    out = []
    for r in rows:
        metrics: dict[str, Any] = dict(r.metrics)
        if r.collective in NONBLOCKING_NAMES and "test_calls" in settings:
            # OSU sizes its dummy compute to the pure time: collbench's compute "auto"
            metrics.update(test_calls=settings["test_calls"], compute="auto")
        algorithm, algorithm_id, selection = _algorithm(r.collective, opts, ids, by_name,
                                                        catalog, name)
        params = {"mca": params_mca, parsed.kind: dict(suite, **(
            {"datatype": r.datatype} if r.datatype else {}))}
        out.append(make_row(
            campaign=campaign, launch_id=launch_id, repetition=opts.repetition,
            backend="ingest", source=parsed.kind, mpi=opts.mpi, mpi_version=opts.mpi_version,
            collective=r.collective, algorithm=algorithm, algorithm_id=algorithm_id,
            segsize=segsizes.get(r.collective, 0), fanout=fanouts.get(r.collective, 0),
            selection=selection, params=json.dumps(params, sort_keys=True),
            nprocs=r.nprocs or launch.nprocs, nodes=launch.nodes, ppn=launch.ppn,
            mapping=opts.mapping, binding=opts.binding, size_bytes=r.size_bytes,
            iterations=r.iterations if r.iterations is not None
            else settings.get("iterations"), warmup=settings.get("warmup"),
            avg_us=r.avg_us, min_us=r.min_us, max_us=r.max_us,
            median_us=r.median_us, bandwidth_mbs=r.bandwidth_mbs,
            metrics=json.dumps(metrics, sort_keys=True) if metrics else None,
            validated=r.validated, status=r.status, error=r.error))
    return out


def _suite_params(parsed: ParsedFile, launch: _Launch) -> dict[str, Any]:
    keep: dict[str, Any]
    if parsed.kind == "osu":
        keep = {"version": parsed.version, "accel": parsed.header.get("accel")}
    else:
        keep = {k: parsed.header.get(k) for k in _IMB_PARAMS}
        keep["world_nprocs"] = launch.nprocs  # ranks idle in MPI_Barrier still share cores
    return {k: v for k, v in keep.items() if v is not None}
