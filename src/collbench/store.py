"""A results folder per campaign: append-only, crash-safe, queried with DuckDB.

Layout (format version records.FORMAT_VERSION):
    campaign.json         name, seed, spec hash, collbench version, format version
    spec.toml             the spec as run (verbatim)
    plan.json             every launch with its points (resume replays exactly this plan)
    provenance.json       host, CPU, MPI, environment, kernel build; ompi_info.txt beside it
    launches/<id>.jsonl   tidy rows of one finished launch: its existence means "done"
    launches/<id>.meta.json  command line, status, wall time, stderr tail, hosts
    samples/<id>.parquet  raw per-iteration samples (optional)
    work/<id>/            job file, kernel output and logs of a launch that did not succeed
    <backend files>       what a backend keeps (platform.toml/.xml, slurm/): backend_file()

This module is the only one that knows these names; everything else asks it.

Every file is written to a temporary name, fsynced and renamed, so a SIGKILL at any
moment leaves either the whole launch or nothing of it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb

from collbench.errors import UserError
from collbench.records import COLUMNS, FORMAT_VERSION, SAMPLE_COLUMNS
from collbench.version import __version__


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode()


def _duck_columns(columns: dict[str, str]) -> str:
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in columns.items()) + "}"


class Store:
    def __init__(self, root: Path) -> None:
        self.root = root

    # --- creation and opening -------------------------------------------------------
    @property
    def meta_path(self) -> Path:
        return self.root / "campaign.json"

    def exists(self) -> bool:
        return self.meta_path.exists()

    def create(self, campaign: dict[str, Any], spec_text: str, plan: dict[str, Any],
               provenance: dict[str, Any]) -> None:
        if self.root.exists() and any(self.root.iterdir()):
            raise UserError(
                f"{self.root}: folder is not empty; use --resume to continue the campaign "
                "stored there, or choose another -o folder"
            )
        meta = dict(campaign, format_version=FORMAT_VERSION, collbench_version=__version__)
        atomic_write(self.root / "spec.toml", spec_text.encode())
        atomic_write(self.root / "plan.json", _json_bytes(plan))
        self.write_provenance(provenance)
        atomic_write(self.meta_path, _json_bytes(meta))  # last: marks the folder complete

    def write_provenance(self, provenance: dict[str, Any]) -> None:
        dump = provenance.pop("mpi_info_dump", None)
        if dump:
            atomic_write(self.root / "ompi_info.txt", str(dump).encode())
        atomic_write(self.root / "provenance.json", _json_bytes(provenance))

    def campaign(self) -> dict[str, Any]:
        return self._read_json(self.meta_path, "campaign.json")

    def plan(self) -> dict[str, Any]:
        return self._read_json(self.root / "plan.json", "plan.json")

    @property
    def spec_file(self) -> Path:
        """The spec as run (its path names it in messages about the stored spec)."""
        return self.root / "spec.toml"

    def spec_text(self) -> str:
        try:
            return self.spec_file.read_text()
        except OSError as e:
            raise UserError(f"{self.spec_file}: unreadable: {e.strerror or e}") from None

    def has_spec(self) -> bool:
        return self.spec_file.exists()

    def provenance(self) -> dict[str, Any]:
        """provenance.json ({} when the folder has none)."""
        path = self.root / "provenance.json"
        if not path.exists():
            return {}
        return self._read_json(path, "provenance.json")

    def mpi_info_dump(self) -> Path | None:
        """The MPI's full parameter dump (ompi_info --all), when the campaign has one."""
        path = self.root / "ompi_info.txt"
        return path if path.exists() else None

    def backend_file(self, name: str) -> Path:
        """Where a backend keeps its own file (or folder) `name` in this campaign."""
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"not a backend file name: {name!r}")
        return self.root / name

    def write_backend_file(self, name: str, text: str) -> None:
        atomic_write(self.backend_file(name), text.encode())

    def _read_json(self, path: Path, what: str) -> dict[str, Any]:
        if not path.exists():
            raise UserError(f"{self.root}: not a collbench results folder (no {what})")
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise UserError(f"{path}: unreadable: {e}") from None
        if not isinstance(data, dict):
            raise UserError(f"{path}: expected a JSON object")
        if what == "campaign.json" and data.get("format_version") != FORMAT_VERSION:
            raise UserError(
                f"{path}: format_version {data.get('format_version')!r} is not supported; "
                f"valid: {FORMAT_VERSION}"
            )
        return data

    # --- launches ---------------------------------------------------------------------
    @property
    def launch_dir(self) -> Path:
        return self.root / "launches"

    def work_dir(self, launch_id: str) -> Path:
        return self.root / "work" / launch_id

    def launch_rows(self, launch_id: str) -> Path:
        """The rows file of a stored launch."""
        return self.launch_dir / f"{launch_id}.jsonl"

    def launch_files(self) -> list[Path]:
        """Every stored launch's rows file."""
        return sorted(self.launch_dir.glob("*.jsonl")) if self.launch_dir.is_dir() else []

    def sample_files(self) -> list[Path]:
        """Every stored launch's raw samples (Parquet)."""
        d = self.root / "samples"
        return sorted(d.glob("*.parquet")) if d.is_dir() else []

    def finished(self) -> dict[str, str]:
        """launch_id -> launch status, for every launch stored."""
        done: dict[str, str] = {}
        if not self.launch_dir.is_dir():
            return done
        for rows in self.launch_dir.glob("*.jsonl"):
            lid = rows.stem
            meta = self.launch_dir / f"{lid}.meta.json"
            try:
                done[lid] = str(json.loads(meta.read_text()).get("status", "ok"))
            except (OSError, ValueError):
                done[lid] = "ok"
        return done

    def forget(self, launch_ids: Iterable[str]) -> None:
        """Drop stored launches (to run them again, e.g. failed ones on --retry-failed)."""
        for lid in launch_ids:
            for p in (self.launch_dir / f"{lid}.jsonl", self.launch_dir / f"{lid}.meta.json",
                      self.root / "samples" / f"{lid}.parquet"):
                p.unlink(missing_ok=True)

    def write_launch(self, launch_id: str, rows: list[dict[str, Any]], meta: dict[str, Any],
                     samples_jsonl: Path | None = None) -> None:
        """Store one finished launch; the rows file is written last and is the commit."""
        for row in rows:
            if set(row) != set(COLUMNS):
                raise ValueError(f"row does not match the data model: {sorted(row)}")
        if samples_jsonl is not None and samples_jsonl.stat().st_size > 0:
            self._write_samples(launch_id, samples_jsonl)
        atomic_write(self.launch_dir / f"{launch_id}.meta.json", _json_bytes(meta))
        body = "".join(json.dumps(r, sort_keys=False) + "\n" for r in rows)
        atomic_write(self.launch_dir / f"{launch_id}.jsonl", body.encode())

    def _write_samples(self, launch_id: str, jsonl: Path) -> None:
        final = self.root / "samples" / f"{launch_id}.parquet"
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.name}.tmp")
        con = duckdb.connect()
        try:
            con.execute(
                f"COPY (SELECT * FROM read_json(?, format='newline_delimited', "
                f"columns={_duck_columns(SAMPLE_COLUMNS)})) TO '{sql_path(tmp)}' "
                "(FORMAT parquet)",
                [str(jsonl)],
            )
        finally:
            con.close()
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, final)

    # --- queries ----------------------------------------------------------------------
    def connect(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with views `measurements` and `samples` over the folder."""
        self.campaign()  # validates the folder
        con = duckdb.connect()
        rows = list(self.launch_dir.glob("*.jsonl")) if self.launch_dir.is_dir() else []
        if rows:
            con.execute(
                "CREATE VIEW measurements AS SELECT * FROM read_json("
                f"'{sql_path(self.launch_dir)}/*.jsonl', format='newline_delimited', "
                f"columns={_duck_columns(COLUMNS)})"
            )
        else:
            cols = ", ".join(f'"{k}" {v}' for k, v in COLUMNS.items())
            con.execute(f"CREATE TABLE measurements ({cols})")
        sample_dir = self.root / "samples"
        if sample_dir.is_dir() and any(sample_dir.glob("*.parquet")):
            con.execute(
                f"CREATE VIEW samples AS SELECT * FROM read_parquet('{sql_path(sample_dir)}"
                "/*.parquet')"
            )
        else:
            cols = ", ".join(f'"{k}" {v}' for k, v in SAMPLE_COLUMNS.items())
            con.execute(f"CREATE TABLE samples ({cols})")
        return con


def open_results(path: str | Path) -> Store:
    """A results folder to read; UserError when `path` holds none."""
    store = Store(Path(path))
    store.campaign()  # validates the folder
    return store


def sql_path(path: Path) -> str:
    # Paths go into SQL string literals (DuckDB table functions need literal globs).
    return str(path.resolve()).replace("'", "''")
