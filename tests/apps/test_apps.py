"""The built-in MPI mini-apps (src/collbench/apps/*.c): build, run at 1-4 ranks, validate,
refuse bad arguments with exit 2 and one line on stderr."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench.apps.jacobi_model import comm_bytes, directions, predict_mlups
from tests.conftest import run_mpi

APPS_DIR = Path(__file__).resolve().parents[2] / "src" / "collbench" / "apps"
PINGPONG = Path(__file__).resolve().parent / "pingpong.c"
APPS = ("ring", "matrix", "jacobi")
CFLAGS = ("-std=c99", "-Wall", "-Wextra", "-O2")


def _tool(name: str) -> Path | None:
    local = Path(sys.executable).parent / name
    if local.exists():
        return local
    found = shutil.which(name)
    return Path(found) if found else None


def _compile(mpicc: Path, src: Path, out: Path) -> str:
    res = subprocess.run([str(mpicc), *CFLAGS, "-o", str(out), str(src), "-lm"],
                         capture_output=True, text=True, check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout + res.stderr


@pytest.fixture(scope="session")
def app_mpicc() -> Path:
    mpicc = _tool("mpicc")
    if mpicc is None:
        pytest.skip("no mpicc")
    return mpicc


@pytest.fixture(scope="session")
def app_build(app_mpicc: Path,
              tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Each app compiled once: name -> (binary, compiler output)."""
    out = tmp_path_factory.mktemp("apps")
    return {name: (out / name, _compile(app_mpicc, APPS_DIR / f"{name}.c", out / name))
            for name in APPS}


@pytest.fixture(scope="session")
def apps(app_build: dict[str, tuple[Path, str]]) -> dict[str, Path]:
    return {name: path for name, (path, _) in app_build.items()}


def _env(singleton: bool) -> dict[str, str]:
    env = {**os.environ, "OMPI_MCA_mpi_yield_when_idle": "1"}  # functional runs only
    if singleton:
        env["OMPI_MCA_btl"] = "self"  # one process: skip probing the other BTLs (~1 s)
    return env


def mpirun(binary: Path, np: int, *args: str,
           timeout: float = 90) -> subprocess.CompletedProcess[str]:
    launcher = _tool("mpirun")
    if launcher is None:
        pytest.skip("no mpirun")
    cmd = [str(launcher)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += ["-np", str(np), "--map-by", "core:OVERSUBSCRIBE", "--bind-to",
            "core:overload-allowed", str(binary), *args]
    return run_mpi(cmd, timeout=timeout, env=_env(False))


def singleton(binary: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """The binary started directly, without mpirun: an MPI singleton (1 rank)."""
    return subprocess.run([str(binary), *args], capture_output=True, text=True,
                          timeout=timeout, env=_env(True), check=False)


def _reject_constant(name: str) -> Any:
    raise AssertionError(f"non-finite number {name} in the JSON line")


def one_json_line(res: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The run succeeded and printed exactly one JSON object of finite numbers on stdout."""
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 1, res.stdout
    record = json.loads(lines[0], parse_constant=_reject_constant)
    assert isinstance(record, dict)
    for key, value in record.items():
        assert value is not None, key
        if isinstance(value, float):
            assert math.isfinite(value), key
    return record


def assert_refused(res: subprocess.CompletedProcess[str], app: str) -> str:
    """Exit 2, nothing on stdout, and (without mpirun) exactly one line on stderr."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert lines and lines[0].startswith(f"{app}: "), res.stderr
    return lines[0]


# ---------------------------------------------------------------------------- build

def test_apps_compile_without_warnings(app_build: dict[str, tuple[Path, str]]) -> None:
    for name, (binary, output) in app_build.items():
        assert binary.exists(), name
        assert "warning" not in output.lower(), f"{name}: {output}"


# ---------------------------------------------------------------------------- ring

@pytest.mark.mpi
@pytest.mark.parametrize(("np", "size"), [
    (1, 8),
    (2, 1000),
    pytest.param(3, 64, marks=pytest.mark.slow),
    pytest.param(4, 4096, marks=pytest.mark.slow),
])
def test_ring(apps: dict[str, Path], np: int, size: int) -> None:
    rec = one_json_line(mpirun(apps["ring"], np, f"size={size}", "iterations=20", "warmup=2"))
    assert rec["app"] == "ring" and rec["valid"] is True
    assert (rec["nprocs"], rec["size_bytes"], rec["iterations"]) == (np, size, 20)
    assert 0 <= rec["min_us"] <= rec["avg_us"] <= rec["max_us"]
    assert rec["step_us"] == pytest.approx(rec["avg_us"] / np, rel=1e-4)


# ---------------------------------------------------------------------------- matrix

def _blocks(shape: Sequence[int], dims: Sequence[int]) -> tuple[list[int], list[int]]:
    return ([n // p for n, p in zip(shape, dims, strict=True)],
            [-(-n // p) for n, p in zip(shape, dims, strict=True)])


@pytest.mark.mpi
@pytest.mark.parametrize(("np", "shape", "dims", "expected"), [
    (1, (5, 4, 3), "0,0,0", (1, 1, 1)),
    (2, (7, 5, 3), "2,1,1", (2, 1, 1)),
    (2, (4, 6, 9), "1,1,2", (1, 1, 2)),
    pytest.param(3, (10, 11, 12), "1,3,1", (1, 3, 1), marks=pytest.mark.slow),
    pytest.param(4, (9, 7, 5), "2,2,1", (2, 2, 1), marks=pytest.mark.slow),
    pytest.param(4, (6, 6, 6), "0,0,0", (2, 2, 1), marks=pytest.mark.slow),
    pytest.param(4, (3, 2, 1), "4,1,1", (4, 1, 1), marks=pytest.mark.slow),  # empty block
    pytest.param(4, (5, 3, 13), "1,0,2", (1, 2, 2), marks=pytest.mark.slow),
])
def test_matrix(apps: dict[str, Path], np: int, shape: tuple[int, int, int], dims: str,
                expected: tuple[int, int, int]) -> None:
    shape_arg = ",".join(map(str, shape))
    rec = one_json_line(mpirun(apps["matrix"], np, f"shape={shape_arg}", f"dims={dims}",
                               "iterations=3", "warmup=1"))
    assert rec["app"] == "matrix" and rec["valid"] is True
    assert rec["nprocs"] == np
    assert tuple(rec["dims"]) == expected
    assert tuple(rec["shape"]) == shape
    assert (rec["block_min"], rec["block_max"]) == _blocks(shape, expected)
    for phase in ("pack", "scatter", "compute", "gather", "unpack", "total"):
        assert rec[f"{phase}_us"] >= 0
    assert rec["total_us"] >= rec["scatter_us"]


@pytest.mark.mpi
@pytest.mark.parametrize(("np", "dims"), [
    (2, "3,1,1"),
    pytest.param(4, "3,0,0", marks=pytest.mark.slow),
    pytest.param(3, "2,2,1", marks=pytest.mark.slow),
])
def test_matrix_refuses_a_grid_of_the_wrong_size(apps: dict[str, Path], np: int,
                                                 dims: str) -> None:
    res = mpirun(apps["matrix"], np, "shape=8,8,8", f"dims={dims}")
    line = assert_refused(res, "matrix")
    assert f"dims={dims}" in line and f"{np} processes" in line
    assert res.stderr.count("matrix: ") == 1  # said once (by rank 0), not once per rank


def test_matrix_refuses_a_grid_of_the_wrong_size_singleton(apps: dict[str, Path]) -> None:
    res = singleton(apps["matrix"], "dims=2,1,1")
    assert_refused(res, "matrix")
    assert len(res.stderr.splitlines()) == 1


# ---------------------------------------------------------------------------- jacobi

@pytest.mark.mpi
@pytest.mark.parametrize(("np", "L", "dims", "expected"), [
    (1, 8, "0,0,0", (1, 1, 1)),
    (2, 12, "1,2,1", (1, 2, 1)),
    (2, 6, "0,0,0", (2, 1, 1)),
    pytest.param(3, 8, "1,1,3", (1, 1, 3), marks=pytest.mark.slow),
    pytest.param(4, 8, "2,2,1", (2, 2, 1), marks=pytest.mark.slow),
    pytest.param(4, 6, "1,0,0", (1, 2, 2), marks=pytest.mark.slow),
    pytest.param(4, 5, "4,1,1", (4, 1, 1), marks=pytest.mark.slow),
])
def test_jacobi(apps: dict[str, Path], np: int, L: int, dims: str,
                expected: tuple[int, int, int]) -> None:
    rec = one_json_line(mpirun(apps["jacobi"], np, f"L={L}", f"dims={dims}",
                               "iterations=10", "warmup=2"))
    assert rec["app"] == "jacobi" and rec["valid"] is True
    assert (rec["nprocs"], rec["L"], rec["iterations"], rec["warmup"]) == (np, L, 10, 2)
    assert tuple(rec["dims"]) == expected
    assert rec["global"] == [L * d for d in expected]
    k = directions(expected)
    assert rec["k"] == k
    assert rec["halo_bytes"] == comm_bytes(L, k)
    assert rec["max_dev"] == 0 and rec["bad_points"] == 0  # the arithmetic is exact
    assert rec["mlups"] > 0 and rec["ts_us"] > 0 and rec["tc_us"] >= 0
    assert rec["time_us"] > 0


@pytest.mark.mpi
@pytest.mark.slow
def test_jacobi_three_directions(apps: dict[str, Path]) -> None:
    rec = one_json_line(mpirun(apps["jacobi"], 8, "L=4", "dims=2,2,2", "iterations=5",
                               "warmup=1"))
    assert rec["valid"] is True and rec["dims"] == [2, 2, 2] and rec["k"] == 3


# ------------------------------------------------------- validation has teeth

def _sabotaged(app_mpicc: Path, tmp_path: Path, app: str, old: str, new: str) -> Path:
    source = (APPS_DIR / f"{app}.c").read_text()
    assert source.count(old) == 1, old
    src = tmp_path / f"{app}_broken.c"
    src.write_text(source.replace(old, new))
    shutil.copy(APPS_DIR / "app_args.h", tmp_path)  # the header the apps share
    _compile(app_mpicc, src, tmp_path / f"{app}_broken")
    return tmp_path / f"{app}_broken"


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize(("old", "new"), [
    # one of the two halo faces is never received
    ("MPI_Sendrecv(u + stride[d], 1,", "if (0) MPI_Sendrecv(u + stride[d], 1,"),
    # halos are exchanged in the first sweep only (stale afterwards)
    ("    const long long stride[3] = {g->sx, g->sy, 1};\n",
     "    const long long stride[3] = {g->sx, g->sy, 1};\n"
     "    static int once;\n    if (once++) return;\n"),
], ids=["face-never-received", "stale-halo"])
def test_jacobi_validation_catches_a_broken_halo(app_mpicc: Path, tmp_path: Path, old: str,
                                                 new: str) -> None:
    broken = _sabotaged(app_mpicc, tmp_path, "jacobi", old, new)
    rec = one_json_line(mpirun(broken, 2, "L=6", "iterations=3", "warmup=0"))
    assert rec["valid"] is False and rec["bad_points"] > 0


@pytest.mark.mpi
@pytest.mark.slow
def test_matrix_validation_catches_a_lost_block(app_mpicc: Path, tmp_path: Path) -> None:
    broken = _sabotaged(app_mpicc, tmp_path, "matrix", "copy_block(C, pa + displs[q]",
                        "if (q) copy_block(C, pa + displs[q]")
    rec = one_json_line(mpirun(broken, 2, "shape=4,4,4", "iterations=1", "warmup=0"))
    assert rec["valid"] is False


@pytest.mark.mpi
@pytest.mark.slow
def test_ring_validation_catches_a_corrupted_byte(app_mpicc: Path, tmp_path: Path) -> None:
    broken = _sabotaged(app_mpicc, tmp_path, "ring", "        long long o_r = origin_of(",
                        "        if (check_all && r->size > 9) r->recv_r[9] ^= 1;\n"
                        "        long long o_r = origin_of(")
    rec = one_json_line(mpirun(broken, 2, "size=16", "iterations=2", "warmup=0"))
    assert rec["valid"] is False


# ---------------------------------------------------------------------------- arguments

BAD_ARGS: list[tuple[str, tuple[str, ...]]] = [
    (app, args) for app in APPS for args in [
        ("foo=1",),
        ("iterations=0",),
        ("iterations=abc",),
        ("iterations=1e3",),
        ("iterations= 5",),
        ("iterations=+5",),
        ("iterations=5x",),
        ("iterations=",),
        ("iterations=99999999999999999999999",),
        ("iterations=-9223372036854775808",),
        ("warmup=-1",),
        ("noequals",),
        ("=5",),
        ("iterations=5", "iterations=6"),
        ("--help",),
    ]
] + [
    ("ring", ("size=7",)),
    ("ring", ("size=67108865",)),
    ("matrix", ("shape=8,8",)),
    ("matrix", ("shape=8,8,8,8",)),
    ("matrix", ("shape=8,,8",)),
    ("matrix", ("shape=0,8,8",)),
    ("matrix", ("shape=1048576,1048576,1048576",)),  # 2^60 elements: no overflow
    ("matrix", ("shape=300,300,300",)),  # over the 1 GiB limit
    ("matrix", ("dims=-1,1,1",)),
    ("jacobi", ("L=0",)),
    ("jacobi", ("L=405",)),  # over the 1 GiB limit
    ("jacobi", ("l=8",)),  # keys are case-sensitive
    ("jacobi", ("dims=1,1",)),
    ("jacobi", ("dims=2,1,1",)),  # a grid of 2 for 1 process
]


@pytest.mark.parametrize(("app", "args"), BAD_ARGS,
                         ids=[f"{a}-{' '.join(x)}" for a, x in BAD_ARGS])
def test_bad_arguments_exit_2_with_one_line(apps: dict[str, Path], app: str,
                                            args: tuple[str, ...]) -> None:
    res = singleton(apps[app], *args)
    assert_refused(res, app)
    assert len(res.stderr.splitlines()) == 1, res.stderr
    assert "usage: " in res.stderr or "limit" in res.stderr or "grid" in res.stderr


def test_error_line_escapes_control_characters(apps: dict[str, Path]) -> None:
    res = singleton(apps["jacobi"], "L=1\n2\x1b[31m")
    line = assert_refused(res, "jacobi")
    assert len(res.stderr.splitlines()) == 1 and "\\x0a" in line and "\x1b" not in line


@pytest.mark.parametrize("app", APPS)
def test_singleton_runs_with_defaults_shrunk(apps: dict[str, Path], app: str) -> None:
    args = {"ring": ["iterations=5"], "matrix": ["shape=8,8,8", "iterations=2"],
            "jacobi": ["L=8", "iterations=3"]}[app]
    rec = one_json_line(singleton(apps[app], *args))
    assert rec["app"] == app and rec["nprocs"] == 1 and rec["valid"] is True


_KEYS = ["size", "iterations", "warmup", "shape", "dims", "L"]
_small = st.integers(-3, 4).map(str)
_huge = st.integers(2**27, 2**70).map(lambda n: str(n) if n % 2 else str(-n))
_junk = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
                max_size=10)
_odd = st.sampled_from(["1.5", "+3", " 3", "0x10", "1e3", "3 ", "", ",", "1,,1", "-", "٣"])
_number = st.one_of(_small, _huge, _odd)
_value = st.one_of(_number, _junk,
                   st.lists(_number, min_size=1, max_size=4).map(",".join))
_argument = st.one_of(
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(_KEYS), _value),
    st.builds(lambda k, v: f"{k}={v}", _junk, _value),
    _junk | st.just("--version") | st.just("-np"),
)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(app=st.sampled_from(APPS), args=st.lists(_argument, max_size=3))
def test_argument_parsing_never_crashes(apps: dict[str, Path], app: str,
                                        args: list[str]) -> None:
    # Valid combinations stay small: every number is either tiny or out of bounds.
    res = singleton(apps[app], *args)
    assert res.returncode in (0, 2), (args, res.returncode, res.stderr)
    if res.returncode == 0:
        rec = one_json_line(res)
        assert rec["valid"] is True
    else:
        assert res.stdout == "" and len(res.stderr.splitlines()) == 1, (args, res.stderr)


# ------------------------------------------------------- the model, fed by a ping-pong

@pytest.mark.mpi
@pytest.mark.slow
def test_pingpong_feeds_the_jacobi_model(app_mpicc: Path, apps: dict[str, Path],
                                         tmp_path: Path) -> None:
    """A smoke test of the calibration chain, not an accuracy test: on an oversubscribed
    shared machine the prediction can be far off."""
    L = 16
    pingpong = tmp_path / "pingpong"
    _compile(app_mpicc, PINGPONG, pingpong)
    pp = one_json_line(mpirun(pingpong, 2, f"size={L * L * 8}", "iterations=200"))
    one = one_json_line(mpirun(apps["jacobi"], 1, f"L={L}", "iterations=20"))
    two = one_json_line(mpirun(apps["jacobi"], 2, f"L={L}", "iterations=20", "dims=2,1,1"))
    predicted = predict_mlups(L, 2, two["k"], one["ts_us"] * 1e-6, pp["latency_us"] * 1e-6,
                              pp["bandwidth_Bps"])
    assert math.isfinite(predicted) and predicted > 0
    assert predicted <= 2 * one["mlups"] * 1.5  # never much above perfect scaling
