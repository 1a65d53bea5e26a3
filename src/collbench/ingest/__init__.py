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
import socket
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from collbench.campaign import create_folder
from collbench.catalog.algorithms import Catalog
from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError
from collbench.ingest.common import ParsedFile, ParsedRow
from collbench.ingest.forced import catalog_for
from collbench.ingest.imb import is_banner, parse_imb
from collbench.ingest.options import FORMATS, IngestOptions, check_name, check_options
from collbench.ingest.osu import is_title, parse_columns, parse_osu
from collbench.ingest.rows import build_rows
from collbench.ingest.table import Context, TableOptions, check_table_options, read_table
from collbench.inputs import OUTPUT_LIMIT, read_bytes
from collbench.store import Store
from collbench.version import __version__

__all__ = ["FORMATS", "IngestOptions", "ParsedFile", "ParsedRow", "TableOptions", "detect",
           "ingest_files", "parse", "parse_imb", "parse_osu"]


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
    check_name("--campaign (default: the -o folder's name)", name)
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
