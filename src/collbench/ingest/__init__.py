"""Import OSU Micro-Benchmarks and Intel MPI Benchmarks text output, and tidy CSV tables
(`ingest.table`), into a results folder.

Each ingested file becomes one stored launch of tidy rows (records.COLUMNS), so existing
results are queried and analysed exactly like measured ones. What the file does not say
(process count, placement, algorithm, MPI) comes from IngestOptions.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from collbench.campaign import create_folder
from collbench.catalog.algorithms import Catalog
from collbench.catalog.forcing import is_forcing_env, is_forcing_mca
from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError, choice_error
from collbench.ingest.common import KNOWN_NAMES, NONBLOCKING_NAMES, ParsedFile, ParsedRow
from collbench.ingest.forced import catalog_for, merged_mca, mpich_forced, recorded_mca
from collbench.ingest.imb import is_banner, parse_imb
from collbench.ingest.osu import (
    TWO_PROCESS_TESTS,
    command_options,
    is_title,
    parse_columns,
    parse_osu,
)
from collbench.ingest.table import Context, TableOptions, check_table_options, read_table
from collbench.inputs import OUTPUT_LIMIT, read_bytes
from collbench.records import make_row
from collbench.store import Store
from collbench.version import __version__

__all__ = ["FORMATS", "IngestOptions", "ParsedFile", "ParsedRow", "TableOptions", "detect",
           "ingest_files", "parse", "parse_imb", "parse_osu"]

FORMATS: Final = ("auto", "osu", "imb", "csv")
# Header lines that describe the experiment (they go into params, which analyses group
# by); the rest (date, machine, calling sequence) describes one run and goes to the meta.
_IMB_PARAMS: Final = ("suite", "imb_version", "MPI Version", "MPI Thread Environment",
                      "MPI_Datatype", "MPI_Datatype for reductions", "MPI_Op", "multi_groups")


@dataclass(frozen=True)
class IngestOptions:
    """What the file does not say. Checked by ingest_files (see check_options)."""

    collective: str | None = None  # required when the OSU title does not say; IMB: a filter
    algorithm: str | None = None  # None: "default", or the name of the id --mca forced
    nprocs: int | None = None  # OSU: required; IMB: must match the job size it prints
    nodes: int = 1
    ppn: int | None = None  # default nprocs / nodes
    mapping: str | None = None
    binding: str | None = None
    mca: tuple[tuple[str, str], ...] = ()
    mpi: str = "unknown"
    mpi_version: str = "unknown"
    repetition: int = 0
    campaign: str | None = None  # default: the output folder's campaign, or its name
    format: str = "auto"
    # OSU options the file's `### cmd:` line does not give: test_calls (-t), iterations
    # (-i), warmup (-x). Left out of the hash when empty: older ids stay the same.
    params: tuple[tuple[str, int], ...] = ()

    def normalized(self) -> dict[str, Any]:
        """The options as stored and hashed: same meaning, same bytes."""
        d = asdict(self)
        d["mca"] = dict(sorted(self.mca))
        if self.params:
            d["params"] = dict(sorted(self.params))
        else:
            del d["params"]
        return d


def check_options(opts: IngestOptions) -> None:
    from collbench.spec.fields import BIND_TO, MAP_BY  # the spec's choices: one vocabulary

    if opts.format not in FORMATS:
        raise choice_error("--format", "format", opts.format, FORMATS)
    if opts.collective is not None and opts.collective not in KNOWN_NAMES:
        raise choice_error("--collective", "collective", opts.collective, KNOWN_NAMES)
    for flag, number, low in (("--nprocs", opts.nprocs, 1), ("--nodes", opts.nodes, 1),
                              ("--ppn", opts.ppn, 1), ("--repetition", opts.repetition, 0)):
        if number is not None and number < low:
            raise UserError(f"{flag}: {number} is not valid; expected a whole number >= {low}")
    if opts.mapping is not None and opts.mapping not in MAP_BY:
        raise choice_error("--mapping", "mapping", opts.mapping, MAP_BY)
    if opts.binding is not None and opts.binding not in BIND_TO:
        raise choice_error("--binding", "binding", opts.binding, BIND_TO)
    if opts.algorithm is not None and not opts.algorithm.strip():
        raise UserError("--algorithm: '' is not valid; expected an algorithm name")
    keys = [k for k, _ in opts.mca]
    for key, value in opts.mca:
        if key.upper().startswith("OMPI_MCA_") or not re.fullmatch(r"[A-Za-z0-9_]+", key):
            raise UserError(f"--mca {key}={value}: {key!r} is not an MCA parameter name "
                            "(letters, digits and '_', without OMPI_MCA_)")
        if keys.count(key) > 1:
            raise UserError(f"--mca {key}: given more than once")
    if opts.campaign is not None:
        _check_name("--campaign", opts.campaign)
    names = [k for k, _ in opts.params]
    for pkey, number in opts.params:
        if pkey not in PARAM_LIMITS:
            raise choice_error("--param", "key", pkey, tuple(PARAM_LIMITS))
        if names.count(pkey) > 1:
            raise UserError(f"--param {pkey}: given more than once")
        low, high = PARAM_LIMITS[pkey]
        if not low <= number <= high:
            raise UserError(f"--param {pkey}={number}: out of range; valid: {low} to {high:,}")


# --param keys (OSU's -t, -i, -x) and their bounds (the kernel's and the row's).
PARAM_LIMITS: Final = {"test_calls": (0, 1_000_000), "iterations": (1, 2**31 - 1),
                       "warmup": (0, 2**31 - 1)}


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


def _check_name(flag: str, name: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise UserError(f"{flag}: {name!r} is not a valid campaign name; use letters, digits, "
                        "'_', '.' and '-'")


# --- parsing --------------------------------------------------------------------------
def detect(text: str, name: str) -> str:
    """Which suite wrote `text` ("osu" or "imb"): the first title, banner or table header."""
    for line in text.splitlines():
        stripped = line.replace("\x00", "").strip()
        if stripped.startswith("###"):
            continue
        if is_title(stripped) or parse_columns(stripped) is not None:
            return "osu"
        if is_banner(stripped):
            return "imb"
    table = " (a CSV table? name its columns: --column FIELD=COLUMN, docs/ingest.md)" \
        if name.lower().endswith(".csv") else ""
    raise UserError(f"{name}: not OSU or IMB output: no '# OSU MPI ... Test' title, no "
                    "'Intel(R) MPI Benchmarks' banner and no '# Benchmarking' line" + table)


def parse(text: str, name: str, fmt: str = "auto", collective: str | None = None) -> ParsedFile:
    kind = detect(text, name) if fmt == "auto" else fmt
    return parse_osu(text, name, collective) if kind == "osu" else parse_imb(text, name)


# --- rows -----------------------------------------------------------------------------
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


def _forced(mca: dict[str, str]) -> tuple[dict[str, tuple[str, int]], dict[str, int],
                                         dict[str, int]]:
    """Per collective: the algorithm forced with --mca (key, id), segment size, fanout."""
    ids: dict[str, tuple[str, int]] = {}
    extra: tuple[dict[str, int], dict[str, int]] = ({}, {})
    pattern = re.compile(r"coll_(?:tuned|libnbc)_(\w+?)_algorithm"
                         r"(?:_(segmentsize)|_(tree_fanout|chain_fanout))?")
    for key, value in mca.items():
        if not (m := pattern.fullmatch(key)):
            continue
        if not re.fullmatch(r"\d{1,9}", value.strip()):
            raise UserError(f"--mca {key}={value}: expected a whole number")
        if m.group(2) or m.group(3):
            extra[0 if m.group(2) else 1][m.group(1)] = int(value)
        else:
            ids[m.group(1)] = (key, int(value))
    return ids, extra[0], extra[1]


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
    ids, segsizes, fanouts = _forced(mca)
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


# --- the results folder -----------------------------------------------------------------
@dataclass(frozen=True)
class _Source:
    path: Path
    data: bytes
    parsed: ParsedFile | None  # None: a CSV table (read with its launch id)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def _read(path: Path, opts: IngestOptions) -> _Source:
    data = read_bytes(path, "benchmark output", OUTPUT_LIMIT)
    if opts.format == "csv":
        return _Source(path, data, None)
    parsed = parse(data.decode("utf-8", errors="replace"), str(path), opts.format,
                   opts.collective)
    return _Source(path, data, parsed)


def _campaign(out: Path, opts: IngestOptions) -> str:
    """The campaign name rows carry: the folder's, else --campaign, else the folder name."""
    store = Store(out)
    if store.exists():
        name = str(store.campaign().get("name"))
        if opts.campaign is not None and opts.campaign != name:
            raise UserError(f"--campaign: {out} holds campaign {name!r}, not "
                            f"{opts.campaign!r}; leave --campaign out or use another folder")
        return name
    if not store.creatable():  # an interrupted creation (a kill, a full disk) is redone
        raise UserError(f"{out}: exists and is not a collbench results folder; choose another "
                        "-o folder")
    name = opts.campaign or out.resolve().name
    _check_name("--campaign (default: the -o folder's name)", name)
    return name


def _open_store(out: Path, campaign: str, paths: list[Path]) -> Store:
    """The folder, locked; created as `collbench run` creates one (campaign.json last), so
    that a creation cut short is done again by the next ingest."""
    store = Store(out)
    store.lock()
    try:
        if not store.exists():
            create_folder(store, {"name": campaign, "seed": 0, "backend": "ingest",
                                  "kind": "ingest"},
                          "# ingested results: no spec\n", {"launches": []}, _provenance(paths))
    except BaseException:
        store.abandon()  # a folder this call made and filled with nothing goes again
        raise
    return store


def _provenance(paths: list[Path]) -> dict[str, Any]:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        user = os.environ.get("USER", "unknown")
    return {"created": datetime.now(UTC).isoformat(timespec="seconds"),
            "collbench_version": __version__, "host": socket.gethostname(), "user": user,
            "kind": "ingest", "sources": [str(p.resolve()) for p in paths]}


def _ingested_digests(store: Store) -> dict[str, str]:
    """sha256 of each stored source file -> its launch id."""
    found: dict[str, str] = {}
    stored = store.finished()  # a meta whose rows never came (a kill) says nothing
    for meta in sorted(store.launch_dir.glob("*.meta.json")) if store.launch_dir.is_dir() else []:
        if meta.name.removesuffix(".meta.json") not in stored:
            continue
        try:
            digest = json.loads(meta.read_text()).get("sha256")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(digest, str):
            found[digest] = meta.name.removesuffix(".meta.json")
    return found


def ingest_files(paths: list[Path], out: Path, options: IngestOptions,
                 log: Callable[[str], None] | None = None,
                 installed: MpiInstall | None = None,
                 table: TableOptions | None = None) -> list[str]:
    """Store each file as one launch in `out`; return the launch ids written.

    Every file is parsed and checked before anything is written, so a bad file leaves the
    folder as it was. A file already stored with the same options is skipped. `installed`:
    the MPI here, whose algorithm table names the ids of runs of its version. `table`: the
    files are tidy CSV tables read with these columns (format "csv")."""
    say = log or (lambda _msg: None)
    if table is not None:
        options = replace(options, format="csv")
        check_table_options(table)
    elif options.format == "csv":
        raise UserError("--format csv: no --column given; valid: name the table's columns, "
                        "e.g. --column size_bytes=size --column avg_us=avg (docs/ingest.md)")
    check_options(options)
    catalog = catalog_for(options.mpi, options.mpi_version, installed)
    sources = [_read(p, options) for p in paths]
    campaign = _campaign(out, options)
    # --format only says how to read the file, not what it holds: left out of the id.
    opts_json = json.dumps(dict(options.normalized(), campaign=campaign, format=None,
                                **({"table": table.normalized()} if table else {})),
                           sort_keys=True)
    prepared = []
    for src in sources:  # every row is built (and checked) before the folder is touched
        h = hashlib.sha256(src.data + opts_json.encode()).hexdigest()
        if src.parsed is None:
            assert table is not None
            lid = f"csv-{h[:12]}"
            prepared.append((src, lid, read_table(src.data, table, _context(
                options, campaign, lid, str(src.path), catalog))))
            continue
        lid = f"{src.parsed.kind}-{h[:12]}"
        prepared.append((src, lid, build_rows(src.parsed, options, campaign, lid,
                                              str(src.path), catalog)))
    written: list[str] = []
    try:
        store = _open_store(out, campaign, paths)
        for src, lid, rows in prepared:
            if lid in store.finished():
                say(f"{src.path}: already ingested as {lid}")
                continue
            if (other := _ingested_digests(store).get(src.digest)) is not None:
                say(f"{src.path}: note: the same file is stored as {other} with other options")
            try:
                store.write_launch(lid, rows, _meta(src, options, campaign, len(rows), table))
            except BaseException:
                store.forget([lid])  # its meta without its rows: nothing of it stays
                raise
            written.append(lid)
            by = {r["collective"] for r in rows}
            say(f"{src.path}: {len(rows)} rows ({', '.join(sorted(by))}) -> launch {lid}")
    except OSError as e:
        raise UserError(f"{out}: cannot write: {e.strerror or e}") from None
    return written


def _context(opts: IngestOptions, campaign: str, lid: str, name: str,
             catalog: Catalog | None) -> Context:
    return Context(name, campaign, lid, opts.collective, opts.algorithm, opts.nprocs,
                   opts.nodes, opts.ppn, opts.mapping, opts.binding, opts.mpi,
                   opts.mpi_version, opts.repetition, dict(opts.mca), catalog)


def _meta(src: _Source, opts: IngestOptions, campaign: str, n_rows: int,
          table: TableOptions | None = None) -> dict[str, Any]:
    p = src.parsed
    if p is None:
        return {"status": "ok", "source_file": str(src.path), "sha256": src.digest,
                "options": dict(opts.normalized(), campaign=campaign,
                                table=table.normalized() if table else None),
                "suite": "csv", "rows": n_rows,
                "ingested": datetime.now(UTC).isoformat(timespec="seconds")}
    return {"status": "ok", "source_file": str(src.path), "sha256": src.digest,
            "options": dict(opts.normalized(), campaign=campaign), "command": p.command,
            "suite": p.kind, "version": p.version, "header": p.header, "rows": n_rows,
            "ingested": datetime.now(UTC).isoformat(timespec="seconds")}
