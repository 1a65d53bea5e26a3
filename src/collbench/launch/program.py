"""A workload's program: found or built (once per MPI, cached), and its output read back.

Build (spec `workload.program.build`, or a built-in app's C file): run with the MPI's own
compiler — an argument `mpicc` (or `{mpicc}`) becomes the backend's compiler (Open MPI's or
MPICH's mpicc, SimGrid's smpicc) — in a private empty folder of the build cache; arguments
naming files beside the spec are passed as absolute paths; the file the run command starts
(`run[0]`) is taken from that folder. The cache key hashes the compiler's identity, the
build command and the contents of every file it names (and the headers beside them), so a
changed source, another MPI or other flags build again and the same inputs never do.

Output: the program's stdout (stdout.txt in the launch's work folder, whichever backend ran
it), read as a JSON object line (the last one) or as named regexes (the last match of each).
Whatever it says is bounded before it is stored (`out_of_bounds`): a time that cannot be a
time, a number no reader can hold, nesting or size without end fail the point, naming the
metric and the value (docs/workloads.md, "Limits").
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Mapping
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, Final, TypeGuard

from collbench.buildcache import BuildError, cache_key, cached_build
from collbench.errors import UserError
from collbench.kernel.build import KernelBinary, mpi_fingerprint
from collbench.spec.workload import APPS, Workload

COMPILER_WORDS: Final = ("mpicc", "{mpicc}")
# Metrics tried for avg_us when the spec names none (µs; *_s in seconds, *_ms in ms).
PRIMARY_CANDIDATES: Final = ("avg_us", "time_us", "total_us", "elapsed_us", "time_s",
                             "elapsed_s")
MAX_STDOUT: Final = 1 << 20  # bytes of a program's stdout read back (its end)
# Bounds of what a program reports (docs/workloads.md, "Limits").
MAX_TIME_US: Final = 1e12  # 11.6 days: no launch runs that long (run.timeout <= 7 days)
MAX_FIGURE: Final = 1e18  # any other number: within a BIGINT, and as a DOUBLE to readers
COUNTS: Final = {"size_bytes": 1 << 50, "iterations": 2**31 - 1, "warmup": 2**31 - 1}
# Stored as the row's times (the primary metric too): 0 to MAX_TIME_US. Other times (…_us,
# …_ms, …_s) may be estimates below zero (PLogP's g): |t| <= MAX_TIME_US.
TIME_COLUMNS: Final = ("avg_us", "min_us", "max_us", "median_us")
MAX_DEPTH: Final = 16  # nesting of a metric's value (lists, objects)
MAX_METRICS_BYTES: Final = 64 << 10  # the metrics object as stored JSON


class ProgramBuildError(BuildError):
    """A workload program did not build; the message holds the command and its output."""


def _spec_dir(origin: str) -> Path:
    return Path(origin).parent.resolve()


def app_source(app: str) -> Path:
    entry = APPS[app]
    return Path(str(resources.files(entry.package).joinpath(entry.source)))


def find_executable(workload: Workload, origin: str) -> Path:
    """A program without a build: its run[0], beside the spec, as a path, or on PATH;
    UserError (one line) when it is missing or not executable."""
    assert workload.program is not None
    exe = workload.program.run[0]
    where = f"{origin}: workload.program.run[0]"
    path = Path(exe) if Path(exe).is_absolute() else _spec_dir(origin) / exe
    if "/" not in exe and not path.exists():
        found = shutil.which(exe)
        if found is None:
            raise UserError(f"{where}: {exe!r} is neither beside the spec nor on PATH; give a "
                            "path to the program (or a build command)")
        path = Path(found)
    if not path.is_file():
        raise UserError(f"{where}: {path} does not exist (or is not a file); build it first "
                        "or add workload.program.build")
    if not os.access(path, os.X_OK):
        raise UserError(f"{where}: {path} is not executable (chmod +x it, or add "
                        "workload.program.build)")
    return path.resolve()


def _product(workload: Workload, origin: str) -> str:
    assert workload.program is not None
    exe = PurePosixPath(workload.program.run[0])
    if exe.is_absolute() or ".." in exe.parts:
        raise UserError(f"{origin}: workload.program.run[0]: {str(exe)!r} must be the file the "
                        "build makes, relative to its folder (e.g. \"./ring\")")
    return str(exe)


def _named_files(build: list[str], spec_dir: Path, product: str) -> list[tuple[int, Path]]:
    """(index, path) of the build arguments naming existing files (not its output)."""
    out = []
    for i, arg in enumerate(build):
        if i == 0 or arg.startswith("-") or (i > 0 and build[i - 1] == "-o"):
            continue
        if PurePosixPath(arg) == PurePosixPath(product):
            continue
        path = Path(arg) if Path(arg).is_absolute() else spec_dir / arg
        if path.is_file():
            out.append((i, path.resolve()))
    return out


def build_command(compiler: Path, workload: Workload, origin: str) -> tuple[list[str],
                                                                             list[Path]]:
    """The build command as it runs (compiler substituted, named files absolute) and the
    files it names."""
    assert workload.program is not None and workload.program.build is not None
    build = list(workload.program.build)
    argv = [str(compiler) if a in COMPILER_WORDS else a for a in build]
    files = _named_files(build, _spec_dir(origin), _product(workload, origin))
    for i, path in files:
        argv[i] = str(path)
    return argv, [p for _, p in files]


def _compiler_identity(compiler: Path) -> str:
    try:
        return mpi_fingerprint(compiler)
    except BuildError as e:
        raise ProgramBuildError(str(e)) from None


def build_program(compiler: Path, workload: Workload, origin: str,
                  cache_dir: Path | None = None) -> KernelBinary:
    """The program every launch of this workload runs: built once per compiler and cached,
    or (no build command) the executable the spec names."""
    if workload.app is not None:
        src, flags = app_source(workload.app), APPS[workload.app].flags
        headers = sorted(src.parent.glob("*.h"))  # app_args.h, shared by the apps
        key = cache_key("app", workload.app, _compiler_identity(compiler), src.read_bytes(),
                        *(h.read_bytes() for h in headers), *flags)
        built = cached_build("programs", workload.app, key,
                             lambda out: [str(compiler), "-O2", *flags, "-o", str(out),
                                          str(src), "-lm"],
                             f"the {workload.app} mini-app", cache_dir,
                             error=ProgramBuildError)
        return KernelBinary(built.path, key, built.command, built.fresh)
    assert workload.program is not None
    if workload.program.build is None:
        path = find_executable(workload, origin)
        return KernelBinary(path, cache_key(path.read_bytes()), [], False)
    product = _product(workload, origin)
    argv, files = build_command(compiler, workload, origin)
    headers = sorted({h for f in files for h in f.parent.glob("*.h")} - set(files))
    key = cache_key("program", _compiler_identity(compiler), *workload.program.build,
                    product, *(part for f in [*files, *headers]
                               for part in (str(f), f.read_bytes())))
    name = PurePosixPath(product).name
    built = cached_build("programs", name, key, lambda out: argv,
                         f"workload.program.build ({workload.label()})", cache_dir,
                         error=ProgramBuildError, product=product)
    return KernelBinary(built.path, key, built.command, built.fresh)


def program_record(binary: KernelBinary, workload: Workload) -> dict[str, Any]:
    """The program's provenance: what ran, how it was built, from what."""
    return {"name": workload.label(), "app": workload.app, "path": str(binary.path),
            "fingerprint": binary.fingerprint, "build_command": binary.compile_command}


# --- output -------------------------------------------------------------------------------

def read_stdout(path: Path) -> str:
    """The end of a program's stdout (empty when it left none)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - MAX_STDOUT))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_float(value: int | float) -> float:
    """A JSON number as a float; an integer too large for one is infinite (not an error)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _show(value: Any) -> str:
    """A value as a reason shows it: short, and one line."""
    if isinstance(value, float):
        return f"{value:g}"  # nan, inf, -5, 2e+12
    text = str(value) if _is_number(value) else repr(value)
    return text if len(text) <= 24 else f"{text[:16]}… ({len(text)} characters)"


def _label(name: str) -> str:
    return name if name.isprintable() and len(name) <= 60 else repr(name[:60])


def time_scale(name: str) -> float | None:
    """µs per unit of a metric named as a time (…_us, …_ms, …_s), else None."""
    for suffix, scale in (("_us", 1.0), ("_ms", 1e3), ("_s", 1e6)):
        if name.endswith(suffix):
            return scale
    return None


def _number_problem(name: str, value: Any, column: bool = False) -> str:
    """Why a number cannot be stored ("" when it can); `column`: it is one of the row's
    times."""
    if not _is_number(value):
        return ""
    number = _as_float(value)
    if name in COUNTS:
        high = COUNTS[name]
        ok = math.isfinite(number) and 0 <= number <= high
        return "" if ok else f"{_show(value)} is out of range (valid: 0 to {high})"
    scale = time_scale(name) or (1.0 if column else None)
    if scale is not None:
        low = 0.0 if column else -MAX_TIME_US
        ok = math.isfinite(number) and low <= number * scale <= MAX_TIME_US
        valid = f"0 to {MAX_TIME_US:g} µs" if column else f"|t| <= {MAX_TIME_US:g} µs"
        return "" if ok else f"{_show(value)} is not a time (valid: {valid})"
    low = 0.0 if name == "bandwidth_mbs" else -MAX_FIGURE
    ok = math.isfinite(number) and low <= number <= MAX_FIGURE
    return "" if ok else f"{_show(value)} is out of range (valid: {low:g} to {MAX_FIGURE:g})"


def _nested_problem(value: Any, depth: int = 0) -> str:
    """Why a metric's value cannot be stored: nesting too deep, a number out of range."""
    if depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    items = value.values() if isinstance(value, dict) else value \
        if isinstance(value, list) else [value] if depth else []
    for item in items:
        if isinstance(item, dict | list):
            why = _nested_problem(item, depth + 1)
        else:
            why = _number_problem("", item)
        if why:
            return why
    return ""


def out_of_bounds(metrics: Mapping[str, Any], primary: str | None = None) -> str:
    """Why a program's metrics cannot be stored, naming the metric and the value ("" when
    they can): a row's time (TIME_COLUMNS, the primary metric) that is not one (negative,
    NaN, infinite, above MAX_TIME_US), another time beyond ±MAX_TIME_US, a size or count
    outside its column, any other number not finite or beyond ±MAX_FIGURE, nesting deeper
    than MAX_DEPTH, or more than MAX_METRICS_BYTES of JSON."""
    columns = {*TIME_COLUMNS, primary_name(metrics, primary)}
    for name, value in metrics.items():
        why = _number_problem(str(name), value, name in columns) or _nested_problem(value)
        if why:
            return f"metric {_label(str(name))}: {why}"
    size = len(json.dumps(metrics, default=str))
    if size > MAX_METRICS_BYTES:
        return f"metrics: {size} bytes of JSON; at most {MAX_METRICS_BYTES} are stored"
    return ""


def _object(line: str) -> dict[str, Any] | None:
    """A line as a JSON object, or None (not JSON, not an object, nested past what the
    parser takes, an integer of more digits than Python converts)."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def parse_metrics(text: str, patterns: Mapping[str, str]) -> tuple[dict[str, Any] | None, str]:
    """(metrics, "") from a program's stdout, or (None, why not)."""
    import re

    if not patterns:
        for line in reversed(text.split("\n")):
            obj = _object(line)
            if obj is not None:
                return obj, ""
        return None, "no JSON object line on stdout"
    out: dict[str, Any] = {}
    missing = []
    for name, regex in patterns.items():
        found = list(re.finditer(regex, text, re.MULTILINE))
        if not found:
            missing.append(f"{name} ({regex!r})")
            continue
        m = found[-1]
        raw = m.group(1) if m.re.groups else m.group(0)
        try:
            out[name] = float(raw)
        except (TypeError, ValueError):
            return None, f"metric {name}: {_show(str(raw)[:60])} is not a number"
    if missing:
        return None, f"metrics never matched on stdout: {', '.join(missing)}"
    return out, ""


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every JSON object line of a program's stdout, in order (other output is skipped; a
    line cut short by a kill is not an object)."""
    return [obj for line in text.split("\n") if (obj := _object(line)) is not None]


def line_size(line: Mapping[str, Any]) -> int | None:
    """The message size a line reports: size_bytes, or size (the PLogP benchmark's)."""
    value = line.get("size_bytes", line.get("size"))
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def primary_name(metrics: Mapping[str, Any], primary: str | None) -> str | None:
    """The metric stored as avg_us: the one asked for, else the first usual one present."""
    return primary or next((c for c in PRIMARY_CANDIDATES if c in metrics), None)


def primary_us(metrics: Mapping[str, Any], primary: str | None) -> tuple[float | None, str]:
    """(the primary figure in µs, "") or (None, why) — None and "" when the program reports
    no time and none was asked for. A figure that cannot be a time is a why."""
    name = primary_name(metrics, primary)
    if name is None:
        return None, ""
    value = metrics.get(name)
    if not _is_number(value):
        return None, f"primary metric {name!r} is {'missing' if value is None else _show(value)}"
    us = _as_float(value) * (time_scale(name) or 1.0)
    if not (math.isfinite(us) and 0 <= us <= MAX_TIME_US):
        return None, (f"metric {_label(name)}: {_show(value)} is not a time (valid: 0 to "
                      f"{MAX_TIME_US:g} µs)")
    return us, ""


def number(metrics: Mapping[str, Any], name: str) -> float | None:
    """A metric as a float: None when it is not a finite number within MAX_FIGURE."""
    value = metrics.get(name)
    if not _is_number(value):
        return None
    figure = _as_float(value)
    return figure if math.isfinite(figure) and abs(figure) <= MAX_FIGURE else None
