"""`collbench model loggp`: LogGP/PLogP parameters per placement level, measured here.

    collbench model loggp --map-by core,socket -o machine.p2p.toml
    collbench model loggp --map-by node --nodes 2 -o m.p2p.toml --update machine.p2p.toml

Runs the PLogP benchmark (`kernel/plogp.c`, Kielmann, Bal and Verstoep's method) at 2 ranks
for each placement as a campaign, as `collbench run` runs a spec: the built-in workload app
"plogp" on the local backend, one launch per placement, a row per message size (its
metrics the benchmark's line), with provenance, resume (`--results DIR --resume`) and the
watchdog. It then fits L, o_s, o_r, g and G per level from the rows (`models/loggp.py`)
and writes them as `[levels.<level>.loggp]` tables of a `.p2p.toml` file: a new file whose
Hockney parameters are fitted to the same benchmark's round trips, or, with `--update`, an
existing file whose levels are kept. A subcommand of `model` (registered by
commands/model.py). Method: docs/models.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any, Final

from collbench.commands import options, results_folder
from collbench.errors import UserError, choice_error
from collbench.storefiles import writing

MAPPINGS: Final = ("core", "socket", "node")
MAX_SIZE: Final = 1 << 26
WARMUP: Final = 5  # untimed round trips per size (plogp.c's warmup=)
NMIN: Final = 4  # the shortest burst that measures g(m) (plogp.c's nmin=)
LOGGP_COLUMNS: Final = ("level", "transport", "L_us", "o_s_us", "o_r_us", "g_us",
                        "G_ns_per_byte", "G_GBs", "G_from_bytes", "method")
POINT_COLUMNS: Final = ("level", "size_bytes", "half_rtt_us", "o_s_us", "o_r_us", "g_us",
                        "g_burst")


def add_parser(msub: options.Subparsers) -> None:
    s = msub.add_parser("loggp", help="measure LogGP/PLogP parameters (L, o_s, o_r, g, G) per "
                                      "placement level into a .p2p.toml",
                        description="Run the PLogP benchmark (Kielmann, Bal and Verstoep's "
                                    "method, kernel/plogp.c) between 2 ranks per placement, "
                                    "fit L, o_s, o_r, g and G (the slope of g(m) for large "
                                    "m) per level and write them as [levels.<level>.loggp] "
                                    "tables (docs/models.md).")
    options.add_mpi(s)
    s.add_argument("--map-by", required=True,
                   help="core, socket, node or a comma list: one level each")
    s.add_argument("--nodes", type=options.count(1, 1_000_000), default=1,
                   help="nodes the 2 ranks may use (--map-by node needs 2; default: 1)")
    s.add_argument("-o", "--output", type=Path, required=True, help="the .p2p.toml to write")
    s.add_argument("--update", type=Path, metavar="EXISTING",
                   help="a .p2p.toml whose levels are kept; the measured levels' loggp tables "
                        "are added or replaced (a level it lacks gets the benchmark's own "
                        "Hockney fit)")
    s.add_argument("--sizes", default="0:1M",
                   help="MIN:MAX message sizes, OSU's range (default: %(default)s; at most 64M)")
    s.add_argument("--reps", type=options.count(3, 10_000), default=20,
                   help="timed repetitions per size for RTT, o_s and o_r (default: "
                        "%(default)s)")
    s.add_argument("--burst", type=options.count(8, 65_536), default=1024,
                   help="the longest burst of messages that measures g(m), at most 8 MiB "
                        "in all (default: %(default)s)")
    s.add_argument("--mca", action="append", default=[], metavar="KEY=VALUE",
                   help="an MCA setting for mpirun (repeatable), e.g. btl=self,tcp; the "
                        "level is labelled with them")
    s.add_argument("--timeout", type=options.seconds, default=300.0,
                   help="seconds per placement before the run is stopped (default: "
                        "%(default)s)")
    results_folder.add_options(s, "--results", "the measurement (a campaign: a launch per "
                               "placement, a row per message size)")
    options.add_format(s, ("table", "json"))
    s.set_defaults(func=cmd_loggp)


def _mappings(text: str) -> list[str]:
    words = [w.strip() for w in text.split(",") if w.strip()]
    if not words:
        raise UserError("model loggp: --map-by: empty; valid: core, socket, node or a comma "
                        "list")
    for w in words:
        if w not in MAPPINGS:
            raise choice_error("model loggp", "--map-by", w, MAPPINGS)
    if len(set(words)) != len(words):
        raise UserError(f"model loggp: --map-by: {text!r} names a placement twice; valid: "
                        "each of core, socket, node at most once")
    return words


def _size_range(text: str) -> tuple[int, int]:
    from collbench.sizes import parse_size

    low_text, sep, high_text = text.partition(":")
    try:
        low, high = parse_size(low_text), parse_size(high_text)
    except ValueError as e:
        raise UserError(f"model loggp: --sizes: {e}") from None
    if not sep or low > high or high > MAX_SIZE:
        raise UserError(f"model loggp: --sizes: {text!r} is not valid; valid: MIN:MAX with "
                        "MIN <= MAX <= 64M, e.g. 0:1M")
    count, size = (1 if low == 0 else 0), max(low, 1)
    while size <= high:
        count, size = count + 1, size * 2
    if count < 3:
        raise UserError(f"model loggp: --sizes: {text!r} gives {count} size(s); valid: a range "
                        "of at least 3 sizes (e.g. 0:1M), G and the Hockney fit need them")
    return low, high


def _mca(pairs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or not value or not pair.isprintable() or len(pair) > 500 \
                or key in out:
            raise UserError(f"model loggp: --mca: {pair!r} is not valid; valid: KEY=VALUE "
                            "(printable, each key once), e.g. btl=self,tcp")
        out[key] = value
    return tuple(sorted(out.items()))


def cmd_loggp(args: argparse.Namespace) -> int:
    wrote: list[Path] = []
    with stoppable() as stop:
        try:
            code = _loggp(args, wrote, stop)
            stop.check()
        except (KeyboardInterrupt, results_folder.Interrupted):
            raise results_folder.Interrupted(_stopped(args, wrote)) from None
        except UserError:
            if stop.signals:  # e.g. a compiler the stop ended, taken for a failed build
                raise results_folder.Interrupted(_stopped(args, wrote)) from None
            raise
    return code


def _stopped(args: argparse.Namespace, wrote: list[Path]) -> str:
    """The one line of a stop (SIGTERM, SIGHUP, Ctrl-C): what is kept."""
    if wrote:
        return f"model loggp: stopped after writing {args.output}"
    if args.keep is None:
        kept = ("nothing is kept (the measurements were in a temporary folder: --results DIR "
                "keeps them, and the same command with --resume goes on)")
    else:
        kept = (f"the placements measured are kept in {args.keep}; the same command with "
                "--resume goes on")
    return f"model loggp: stopped; {args.output} not written; {kept}"


def _loggp(args: argparse.Namespace, wrote: list[Path], stop: _Stop) -> int:
    import duckdb  # noqa: F401  (read_points': imported here, where no stop cuts it short)

    from collbench.analyse.modeldata import pingpong_level
    from collbench.campaign import SpecSource
    from collbench.models.loggp import METHOD, fit_level_loggp
    from collbench.models.p2p import P2PModel
    from collbench.models.p2pfile import read_p2p, write_p2p

    # everything the user typed is checked before anything is built or run
    mappings = _mappings(args.map_by)
    low, high = _size_range(args.sizes)
    mca = _mca(args.mca)
    transport = " ".join(f"{k}={v}" for k, v in mca) or "default"
    levels: dict[str, str] = {}
    for mapping in mappings:
        level = pingpong_level(mapping, args.nodes, 1 if mapping == "node" else 2,
                               "model loggp")
        if level is None:
            raise UserError("model loggp: --map-by node on one node is not a level; valid: "
                            "--nodes 2 (or more) with --map-by node")
        levels[mapping] = level
    base = read_p2p(args.update, required_levels=()) if args.update is not None else None
    if base is not None:
        for level in levels.values():
            have = base.levels.get(level)
            if have is not None and have.transport != transport:
                raise UserError(f"{args.update}: levels.{level}.transport: {have.transport!r} "
                                f"is not the setting measured ({transport!r}); valid: the "
                                "same --mca settings, or no --update (settings are never "
                                "mixed)")
    results_folder.check(args, "model loggp")
    mpi = options.mpi(args)
    source = SpecSource.from_text(spec_text(mappings, (low, high), args.reps, args.burst, mca,
                                            args.timeout), "model loggp")
    with results_folder.root(args, "collbench-loggp-") as root:
        with stop.at_once():
            results_folder.measure(source, mpi, root, args.resume, say=results_folder.say)
        measured_by_mapping = read_points(root, mappings, args.timeout,
                                          kept=args.keep is not None)
        stop.check()
    if args.keep is not None:
        print(f"collbench: measurements kept in {args.keep} (collbench show {args.keep})",
              file=sys.stderr)
    fitted: dict[str, Any] = {}
    measured: dict[str, Any] = {}
    notes: list[str] = []
    for mapping, level in levels.items():
        points = measured_by_mapping[mapping]
        fit = fit_level_loggp(points, level, transport, where=f"plogp --map-by {mapping}")
        fitted[level], measured[level] = fit.model, points
        notes += fit.notes
    if _one_socket() and "socket" in levels.values() and args.nodes == 1:
        notes.append("this machine has one socket: --map-by socket put both ranks on it, so "
                     "the 'socket' level measured here is the core level")
    mpi_name = f"{mpi.implementation} {mpi.version}"
    what = f"{METHOD}; {mpi_name}; map-by {','.join(mappings)}; nodes {args.nodes}"
    if base is None:
        model = P2PModel(fitted, 0.0, {"origin": "fit", "method": f"Hockney fit of RTT(m)/2 "
                                       f"and {what}", "transport": transport})
    else:
        merged = dict(base.levels)
        for level, lm in fitted.items():
            merged[level] = replace(merged[level], loggp=lm.loggp) if level in merged else lm
        model = P2PModel(merged, base.gamma_us_per_byte, {**base.source, "loggp": what})
    stop.check()
    try:
        write_p2p(model, args.output)
    except OSError as e:
        raise UserError(f"{args.output}: cannot write: {e.strerror or e}") from None
    wrote.append(args.output)
    rows = loggp_rows(model, set(fitted))
    points_rows = [_point_row(level, p) for level, pts in measured.items() for p in pts]
    if args.format == "json":
        print(json.dumps({"file": str(args.output), "loggp": rows, "points": points_rows,
                          "notes": notes}, indent=1))
        return 0
    from collbench.tables import render

    print(f"# PLogP measurements (µs; medians of {args.reps}): one-way = RTT(m)/2")
    print(render([shown(r) for r in points_rows], POINT_COLUMNS, "table"))
    print(f"\n# LogGP/PLogP parameters per level ({METHOD})")
    print(render([shown(r) for r in rows], LOGGP_COLUMNS, "table"))
    print(f"wrote {args.output}" + (f" (levels of {args.update} kept)" if base else ""))
    for n in notes:
        print(f"note: {n}")
    return 0


STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


RETRY_S: Final = 0.05  # a stop found inside a write or an import comes again this late


@dataclass
class _Stop:
    """A stop asked for (SIGTERM, SIGHUP, Ctrl-C): what this process started in its own
    session ends at once; the command stops at the next check(), or inside at_once() at the
    next safe point, with KeyboardInterrupt (the temporary folder and partial files go).
    Not a safe point: inside a file's write (a rename, its temporary's removal, cut short)
    or a module's import (an exception in a C extension's set-up aborts the process); the
    signal is delivered again a moment later, by when the runner may have taken over (it
    discards the launch under way and keeps the finished ones)."""

    signals: list[int] = field(default_factory=list)
    live: bool = False
    stopping: bool = False  # KeyboardInterrupt raised: the command is on its way out

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)
        end_children()
        if not self.live or self.stopping:
            return
        if writing(frame) or _importing(frame):
            again = threading.Timer(RETRY_S, os.kill, (os.getpid(), signum))
            again.daemon = True
            again.start()
            return
        self.stopping = True
        raise KeyboardInterrupt

    def check(self) -> None:
        if self.signals:
            raise KeyboardInterrupt

    @contextmanager
    def at_once(self) -> Iterator[None]:
        """Around the measurement (builds, ompi_info, launches: each safe to interrupt).
        Elsewhere an exception raised at any moment could cut a native module's start-up
        short: DuckDB's then aborts the process."""
        self.live = True
        try:
            self.check()
            yield
        finally:
            self.live = False


def _importing(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


@contextmanager
def stoppable() -> Iterator[_Stop]:
    """SIGTERM and SIGHUP stop the command as Ctrl-C does, not silently (exit 143) with the
    temporary folder and a compiler left behind. While a launch runs, the runner's own
    handlers take over: it discards the launch (results_folder.Interrupted)."""
    stop = _Stop()
    old = {s: signal.signal(s, stop) for s in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def end_children() -> None:
    """SIGTERM what this process started in its own session (the compiler under mpicc,
    ompi_info): subprocess.run kills only its own child. Launches have sessions of their
    own, ended by their own cleanup (process.run_group, the watchdog)."""
    me, sid = os.getpid(), os.getsid(0)
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # state ppid pgrp session
            if int(fields[3]) == sid:
                parent[int(stat.parent.name)] = int(fields[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    for pid in parent:
        up = parent.get(pid)
        while up is not None and up != me:
            up = parent.get(up)
        if up == me and pid != me:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)


def spec_text(mappings: Sequence[str], sizes: tuple[int, int], reps: int, burst: int,
              mca: Sequence[tuple[str, str]], timeout_s: float) -> str:
    """The campaign: the plogp app at 2 ranks, one launch per placement (bound to cores)."""
    fixed = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in mca)
    params = {"min": sizes[0], "max": sizes[1], "reps": reps, "warmup": WARMUP, "nmin": NMIN,
              "nmax": burst}
    return "\n".join([
        "[campaign]", 'name = "loggp"', "[measure]", "nprocs = [2]",
        f"map_by = {json.dumps(list(mappings))}", 'bind_to = ["core"]',
        *(["[mca]", f"fixed = {{ {fixed} }}"] if mca else []),
        "[run]", 'backend = "local"', f"timeout = {float(timeout_s)!r}",
        'order = "sequential"',
        "[workload]", 'app = "plogp"',
        "params = { " + ", ".join(f"{k} = {v}" for k, v in params.items()) + " }",
    ]) + "\n"


def read_points(folder: Path, mappings: Sequence[str], timeout_s: float,
                kept: bool) -> dict[str, list[Any]]:
    """The benchmark's points per placement from the campaign's rows; a placement that did
    not measure every size is one line with the reason stored."""
    from collbench import points
    from collbench.kernel.plogp import read_point
    from collbench.store import Store

    rows = sorted(((r["mapping"], r["size_bytes"], r["status"], r["error"], r["metrics"])
                   for r in points.read(Store(folder), collective="plogp")),
                  key=lambda r: (str(r[0]), int(r[1] or 0)))
    out: dict[str, list[Any]] = {m: [] for m in mappings}
    for mapping, size, status, error, metrics in rows:
        where = f"plogp --map-by {mapping}"
        if status != "ok":
            raise UserError(_failure(where, str(status), str(error or ""), timeout_s)
                            + (f" (stored in {folder}; --resume runs it again)" if kept
                               else ""))
        if mapping in out:
            out[mapping].append(read_point(points.metrics_of(metrics), f"{where}: {size} B"))
    return out


def _failure(where: str, status: str, error: str, timeout_s: float) -> str:
    """The one line of a placement that failed: the benchmark's own message when it left
    one (a bad argument, a rank count), else the launcher's last words."""
    from collbench.kernel.plogp import PROGRAM_NAME

    if status == "timeout":
        return (f"{where}: still running after {timeout_s:g} s and stopped; valid: a larger "
                "--timeout, or fewer --sizes / --reps")
    why, _, stderr = error.partition("; stderr: ")
    lines = [ln.strip() for ln in stderr.splitlines()
             if ln.strip() and not set(ln.strip()) <= {"-"}]
    own = [ln for ln in lines if ln.startswith(f"{PROGRAM_NAME}:")]
    tail = " | ".join(own or lines)
    return f"{where}: {why}: {tail[-400:] or '(no message)'}"


def _one_socket() -> bool:
    packages = {p.read_text().strip() for p in
                Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology/physical_package_id")
                if p.is_file()}
    return len(packages) == 1


def _point_row(level: str, p: Any) -> dict[str, Any]:
    return {"level": level, "size_bytes": p.size_bytes, "half_rtt_us": p.rtt_us / 2,
            "o_s_us": p.os_us, "o_r_us": p.or_us, "g_us": p.g_us,
            "g_burst": p.g_n if p.g_converged else f"{p.g_n} (not settled)"}


def loggp_rows(model: Any, only: set[str] | None = None) -> list[dict[str, Any]]:
    """One row per level of `model` that has LogGP parameters (µs; G also as GB/s)."""
    out = []
    for name in MAPPINGS:  # the level names are the mapping names
        lm = model.levels.get(name)
        if lm is None or lm.loggp is None or (only is not None and name not in only):
            continue
        p = lm.loggp
        out.append({"level": name, "transport": lm.transport, "L_us": p.L_us,
                    "o_s_us": p.o_s_us, "o_r_us": p.o_r_us, "g_us": p.g_us,
                    "G_ns_per_byte": p.G_us_per_byte * 1e3,
                    "G_GBs": 1e-3 / p.G_us_per_byte if p.G_us_per_byte > 0 else None,
                    "G_from_bytes": p.G_from_bytes, "method": p.method})
    return out


def shown(row: dict[str, Any]) -> dict[str, Any]:
    """Floats with 4 significant digits (G is a small number of ns)."""
    return {k: f"{v:.4g}" if isinstance(v, float) else v for k, v in row.items()}
