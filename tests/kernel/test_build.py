"""Building the kernel: cache reuse, fingerprints, compile errors, concurrent builds."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from collbench import buildcache
from collbench.kernel import build
from collbench.kernel.build import KernelBuildError, build_kernel, kernel_source, mpi_fingerprint


def test_source_ships_in_the_package() -> None:
    src = kernel_source()
    assert src.name == "collbench_kernel.c"
    assert "MPI_Init" in src.read_text()


def test_build_then_reuse_without_recompiling(mpicc: Path, tmp_path: Path) -> None:
    first = build_kernel(mpicc, cache_dir=tmp_path)
    assert first.path == tmp_path / "kernels" / first.fingerprint / "collbench_kernel"
    assert os.access(first.path, os.X_OK)
    assert first.compile_command[0] == str(mpicc)
    assert first.compile_command[1] == "-O2" and first.compile_command[-1] == "-lm"
    mtime = first.path.stat().st_mtime_ns

    second = build_kernel(mpicc, cache_dir=tmp_path)
    assert (second.path, second.fingerprint, second.compile_command) == (
        first.path, first.fingerprint, first.compile_command)
    assert first.fresh and not second.fresh
    assert second.path.stat().st_mtime_ns == mtime
    assert [p.name for p in first.path.parent.iterdir()] == ["collbench_kernel"]  # no temp


def test_cache_dir_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path))
    assert buildcache.default_cache_dir() == tmp_path
    monkeypatch.delenv("COLLBENCH_CACHE")
    assert buildcache.default_cache_dir() == Path.home() / ".cache" / "collbench"


def test_kernel_compiles_without_warnings(mpicc: Path, tmp_path: Path) -> None:
    strict = build_kernel(mpicc, cache_dir=tmp_path,
                          extra_cflags=["-Wall", "-Wextra", "-Werror", "-std=c11"])
    plain = build_kernel(mpicc, cache_dir=tmp_path)
    assert strict.fingerprint != plain.fingerprint  # flags are part of the fingerprint
    assert strict.path != plain.path
    assert strict.compile_command[2:6] == ["-Wall", "-Wextra", "-Werror", "-std=c11"]


def test_source_change_gives_a_new_fingerprint(mpicc: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    original = build_kernel(mpicc, cache_dir=tmp_path)
    changed = tmp_path / "changed.c"
    changed.write_text(kernel_source().read_text() + "\n/* changed */\n")
    monkeypatch.setattr(build, "kernel_source", lambda: changed)
    rebuilt = build_kernel(mpicc, cache_dir=tmp_path)
    assert rebuilt.fingerprint != original.fingerprint
    assert rebuilt.path.exists() and original.path.exists()


def test_compile_error_reports_command_and_compiler_output(
        mpicc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "broken.c"
    broken.write_text("int main(void) { return undeclared_symbol_xyz; }\n")
    monkeypatch.setattr(build, "kernel_source", lambda: broken)
    with pytest.raises(KernelBuildError) as info:
        build_kernel(mpicc, cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert str(mpicc) in message and str(broken) in message and "-lm" in message
    assert "undeclared_symbol_xyz" in message  # the compiler's own diagnostic
    out_dir = next((tmp_path / "cache" / "kernels").iterdir())
    assert list(out_dir.iterdir()) == []  # neither a binary nor a temp file is left


def test_missing_compiler_is_a_build_error(tmp_path: Path) -> None:
    with pytest.raises(KernelBuildError, match="not found"):
        build_kernel(tmp_path / "no-such-mpicc", cache_dir=tmp_path)


def test_fingerprint_is_stable_and_names_the_compiler(mpicc: Path, tmp_path: Path) -> None:
    assert mpi_fingerprint(mpicc) == mpi_fingerprint(mpicc)
    # Another wrapper (even a link to the same one) is another MPI to the cache.
    link = tmp_path / "mpicc"
    link.symlink_to(mpicc.resolve())
    assert mpi_fingerprint(link) == mpi_fingerprint(mpicc)  # same resolved wrapper
    copy = tmp_path / "mpicc-copy"
    copy.write_bytes(mpicc.resolve().read_bytes())
    copy.chmod(0o755)
    assert mpi_fingerprint(copy) != mpi_fingerprint(mpicc)


def test_concurrent_builds_publish_one_whole_binary(mpicc: Path, tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda _: build_kernel(mpicc, cache_dir=tmp_path), range(3)))
    assert len({r.path for r in results}) == 1
    path = results[0].path
    assert os.access(path, os.X_OK)
    assert sorted(p.name for p in path.parent.iterdir()) == ["collbench_kernel"]
