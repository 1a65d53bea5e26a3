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
moment leaves either the whole launch or nothing of it. campaign.json is written last: a
folder without it is an interrupted creation, which the same command completes. A process
that writes a folder holds its lock (.collbench.lock, flock: released when the process
dies, however it dies); readers never need it.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from collbench import duckstop
from collbench.errors import UserError
from collbench.records import COLUMNS, FORMAT_VERSION, READABLE_FORMATS, SAMPLE_COLUMNS
from collbench.storefiles import atomic_write
from collbench.version import __version__

if TYPE_CHECKING:
    import duckdb

T = TypeVar("T")


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode()


def _duck_columns(columns: dict[str, str]) -> str:
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in columns.items()) + "}"


class Store:
    def __init__(self, root: Path, only_mpi: str | None = None) -> None:
        self.root = root
        self.last_damage: dict[str, str] = {}
        # a reader of one MPI's rows in a campaign of several ([measure] mpi): the
        # measurements view holds only the rows whose mpi column is this key
        self.only_mpi = only_mpi

    # --- creation and opening -------------------------------------------------------
    @property
    def meta_path(self) -> Path:
        return self.root / "campaign.json"

    def exists(self) -> bool:
        return self.meta_path.exists()

    def lock(self) -> None:
        """Hold this folder for writing until this process ends; a second writer gets a
        one-line error naming the holder's PID."""
        hold(self.root)

    def abandon(self) -> None:
        """Undo lock() on a folder that holds nothing else (a command failed early)."""
        real = self.root.resolve()
        if real not in _HELD or self.exists():
            return
        if set(os.listdir(self.root)) <= {LOCK_NAME}:
            os.close(_HELD.pop(real))
            (self.root / LOCK_NAME).unlink(missing_ok=True)
            self.root.rmdir()

    def creatable(self) -> bool:
        """No campaign here, and nothing but what an interrupted creation leaves (its
        files, the lock, temporaries): create() may write it, again."""
        if self.exists() or (self.root.exists() and not self.root.is_dir()):
            return False
        return not self.root.is_dir() or not [
            n for n in os.listdir(self.root)
            if not n.startswith(".") and n not in _CREATION_FILES]

    def create(self, campaign: dict[str, Any], spec_text: str, plan: dict[str, Any],
               provenance: dict[str, Any]) -> None:
        # What an interrupted creation leaves is overwritten; anything else is the user's.
        if self.root.is_dir() and not self.creatable():
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
        if what == "campaign.json" and data.get("format_version") not in READABLE_FORMATS:
            raise UserError(
                f"{path}: format_version {data.get('format_version')!r} is not supported; "
                f"valid: {', '.join(map(str, READABLE_FORMATS))}"
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
        """launch_id -> status of every launch stored whole: "ok", "partial" (the launch
        ran but some of its points failed or were invalid), or the launch's own status.
        A damaged rows file (empty, cut short, not JSON, another number of rows than the
        plan has points) does not count: see damaged()."""
        planned = self._planned_points()
        done: dict[str, str] = {}
        self.last_damage = {}
        for rows in self.launch_files():
            lid = rows.stem
            statuses, why = _row_statuses(rows, planned.get(lid))
            if statuses is None:
                continue  # gone since the folder was listed: not stored (any more)
            if why:
                self.last_damage[lid] = why
                continue
            meta = self.launch_dir / f"{lid}.meta.json"
            try:
                status = str(json.loads(meta.read_text()).get("status", "ok"))
            except (OSError, ValueError, AttributeError):
                status = "ok"
            if status == "ok" and any(st != "ok" for st in statuses):
                status = "partial"
            done[lid] = status
        return done

    def damaged(self) -> dict[str, str]:
        """launch_id -> why its stored rows cannot be trusted (they are measured again)."""
        self.finished()
        return dict(self.last_damage)

    def _planned_points(self) -> dict[str, int]:
        try:
            launches = self.plan().get("launches", [])
            return {str(la["launch_id"]): len(la["points"]) for la in launches}
        except (UserError, KeyError, TypeError):
            return {}

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
        import duckdb  # lazily: only queries and samples need it (0.1-0.2 s to import)

        con = duckdb.connect()
        try:
            src = _glob_safe(jsonl.parent) / jsonl.name
            con.execute(
                f"COPY (SELECT * FROM read_json(?, format='newline_delimited', "
                f"columns={_duck_columns(SAMPLE_COLUMNS)})) TO '{sql_path(tmp)}' "
                "(FORMAT parquet)",
                [str(src)],  # a parameter: no quoting to get wrong
            )
        finally:
            con.close()
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, final)

    # --- queries ----------------------------------------------------------------------
    def check_files(self) -> None:
        """UserError naming the first damaged rows file (readers say so, never crash)."""
        self.finished()
        for lid, why in sorted(self.last_damage.items()):
            raise UserError(f"{self.launch_rows(lid)}: damaged ({why}); `collbench run SPEC "
                            f"-o {self.root} --resume` measures that launch again")

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with views `measurements` and `samples` over the folder."""
        self.campaign()  # validates the folder
        self.check_files()
        import duckdb

        con = duckstop.opened(duckdb.connect())  # a Ctrl-C interrupts its query
        try:
            self._views(con)
        except BaseException:  # a rows file gone meanwhile (reading() reads again)
            con.close()
            raise
        return con

    def _views(self, con: duckdb.DuckDBPyConnection) -> None:
        root = _glob_safe(self.root)
        if self.launch_files():
            only = "" if self.only_mpi is None else \
                f" WHERE mpi = '{self.only_mpi.replace(chr(39), chr(39) * 2)}'"
            con.execute(
                "CREATE VIEW measurements AS SELECT * FROM read_json("
                f"'{_literal(root)}/launches/*.jsonl', format='newline_delimited', "
                f"columns={_duck_columns(COLUMNS)}){only}"
            )
        else:
            cols = ", ".join(f'"{k}" {v}' for k, v in COLUMNS.items())
            con.execute(f"CREATE TABLE measurements ({cols})")
        if self.sample_files():
            con.execute(
                f"CREATE VIEW samples AS SELECT * FROM read_parquet('{_literal(root)}"
                "/samples/*.parquet')"
            )
        else:
            cols = ", ".join(f'"{k}" {v}' for k, v in SAMPLE_COLUMNS.items())
            con.execute(f"CREATE TABLE samples ({cols})")

    def reading(self, scan: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """scan(connect()) on a connection closed after it. Readers take no lock: a run
        rewriting the folder (`--retry-failed` removes the rows of failed launches, then
        stores them again) can remove a rows file between DuckDB listing the folder and
        reading it; the folder is then read again (up to REREADS times), and one line
        names it if it never reads whole. Other errors are the caller's to word."""
        import duckdb

        self.campaign()  # validates the folder, once
        for attempt in range(REREADS + 1):
            last, con = attempt == REREADS, None
            try:
                con = self.connect()
                return scan(con)
            except UserError:  # scan's own, or the damage check: damaged still?
                if con is not None or last or self.damaged():
                    raise
            except duckdb.IOException as e:
                said = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
                if not self._gone(said):
                    raise
                if last:
                    raise UserError(f"{self.root}: cannot be read ({said}); valid: a results "
                                    "folder no run is rewriting, readable") from None
            finally:
                if con is not None:
                    con.close()
        raise AssertionError("unreachable")

    def _gone(self, said: str) -> bool:
        """Whether DuckDB's `said` is of a file of this folder gone while it read."""
        return any(g in said for g in GONE) and str(_glob_safe(self.root)) in said


REREADS: Final = 8  # a read races a rewrite about 1 in 10 times, more on a loaded machine
GONE: Final = ("No such file", "No files found")  # what DuckDB says of a file gone
_CREATION_FILES = frozenset({"spec.toml", "plan.json", "provenance.json", "ompi_info.txt"})
MAX_ROWS_FILE = 512 * 1024 * 1024  # a rows file larger than this was not written by us


def _row_statuses(path: Path, planned: int | None) -> tuple[list[str] | None, str]:
    """(status of each row, "") for a sound rows file, ([], why it is damaged), or
    (None, "") for a file gone since the folder was listed: readers take no lock, and a
    run rewriting the folder (`--retry-failed`) removes rows files; that is no damage."""
    try:
        if path.stat().st_size > MAX_ROWS_FILE:
            return [], "larger than any launch collbench writes"
        data = path.read_bytes()
    except FileNotFoundError:
        return None, ""
    except OSError as e:
        return [], f"unreadable: {e.strerror or e}"
    if not data:
        return [], "empty"
    if not data.endswith(b"\n"):
        return [], "cut short"
    statuses = []
    for n, line in enumerate(data.splitlines(), start=1):
        try:
            row = json.loads(line)
        except ValueError:
            return [], f"line {n} is not JSON"
        if not isinstance(row, dict) or set(row) != set(COLUMNS):
            return [], f"line {n} is not a collbench row"
        statuses.append(str(row.get("status")))
    if planned is not None and len(statuses) != planned:
        return [], f"{len(statuses)} rows, the plan has {planned} points"
    return statuses, ""


def _literal(path: Path) -> str:
    """`path` inside an SQL string literal, as it is (not resolved: it may be an alias)."""
    return str(path).replace("'", "''")


_ALIASES: dict[Path, Path] = {}


def _glob_safe(root: Path) -> Path:
    """A path to `root` DuckDB's globbing reads literally: the folder itself, or a symlink
    to it in a private temporary folder when its path holds glob characters."""
    real = root.resolve()
    if not any(c in str(real) for c in "*?[]{}"):
        return real
    if real not in _ALIASES:
        tmp = Path(tempfile.mkdtemp(prefix="collbench-alias-"))
        atexit.register(shutil.rmtree, tmp, True)  # removes the link, never its target
        (tmp / "r").symlink_to(real, target_is_directory=True)
        _ALIASES[real] = tmp / "r"
    return _ALIASES[real]


LOCK_NAME = ".collbench.lock"
_HELD: dict[Path, int] = {}


def hold(root: Path) -> None:
    """Lock folder `root` for writing until this process ends (creating the folder)."""
    if "\0" in str(root):
        raise UserError(f"{root!r}: a path cannot hold a NUL byte; choose another -o folder")
    real = root.resolve()
    if real in _HELD:
        return
    if root.exists() and not root.is_dir():
        raise UserError(f"{root}: is a file, not a results folder; choose another -o folder")
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise UserError(f"{root}: cannot write here: {e.strerror or e}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise UserError(f"{root}: in use by another collbench (PID {holder}); wait for it to "
                        "finish, or stop it") from None
    _HELD[real] = fd  # kept open: the lock lasts as long as this process
    try:  # the holder's PID, for the message another writer gets (a full disk may refuse)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass


def open_results(path: str | Path) -> Store:
    """A results folder to read; UserError when `path` holds none."""
    store = Store(Path(path))
    store.campaign()  # validates the folder
    return store


def sql_path(path: Path) -> str:
    # Paths go into SQL string literals (DuckDB table functions need literal globs).
    return str(path.resolve()).replace("'", "''")
