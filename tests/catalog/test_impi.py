"""Intel MPI: install, discovery, the preset catalogue from impi_info, forcing and its check.

The real Intel MPI is the `impi==2021.18.1` private install (impi-rt and impi-devel wheels,
tests/backend_support.TEST_MPIS); the tests that need it are marked slow.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collbench.catalog import impi
from collbench.catalog.collectives import COLLECTIVES
from collbench.catalog.forcing import is_forcing_env
from collbench.catalog.load import load_catalog
from collbench.catalog.mpi import find_mpi, launcher_env
from collbench.catalog.mpi_install import parse_spec, resolve_mpi
from collbench.cli import main
from collbench.errors import UserError
from tests.backend_support import TEST_MPIS, private_mpi

# The shape of `impi_info -a` (2021.18.1): a variable's name alone on its line (with a
# trailing space there), then its description; only I_MPI_ADJUST_<COLL> blocks that state a
# range count.
LISTING = """\
I_MPI_ADJUST_BCAST
  MPI Datatype:
    MPI_CHAR
  Description:
    Controls bcast algorithm: Control selection of MPI_Bcast algorithm presets.
    Arguments
    <presetid> - Preset identifier
    range: 0-4
I_MPI_ADJUST_BCAST_LIST
  MPI Datatype:
    MPI_CHAR
I_MPI_ADJUST_IBARRIER
  Description:
    range: 0-2
I_MPI_PIN_DOMAIN
    range: 0-9
I_MPI_ADJUST_SENDRECV_REPLACE
    range: 0-2
"""


def test_ranges_are_read_per_adjust_variable_and_become_presets() -> None:
    ranges = impi.parse_ranges(LISTING)
    assert impi.parse_ranges(LISTING.replace("\n", " \n")) == ranges
    assert ranges == {"I_MPI_ADJUST_BCAST": 4, "I_MPI_ADJUST_IBARRIER": 2,
                      "I_MPI_ADJUST_SENDRECV_REPLACE": 2}
    table = impi.presets(ranges)
    assert set(table) == {"bcast", "ibarrier"}  # sendrecv_replace is no collective here
    assert [(a.name, a.id) for a in table["bcast"]] == [
        ("preset1", 1), ("preset2", 2), ("preset3", 3), ("preset4", 4)]
    assert not any(a.runtime_switchable or a.segmentable for a in table["bcast"])


@given(st.binary(max_size=4000))
def test_any_listing_gives_bounded_ranges(data: bytes) -> None:
    ranges = impi.parse_ranges(data.decode("utf-8", "replace"))
    assert all(name.startswith("I_MPI_ADJUST_") and 0 < high <= impi.MAX_PRESETS
               for name, high in ranges.items())


def test_forcing_sets_the_preset_and_the_fallback_check() -> None:
    alg = impi.presets({"I_MPI_ADJUST_REDUCE_SCATTER_BLOCK": 3})["reduce_scatter_block"][2]
    env = impi.forcing_env("reduce_scatter_block", alg)
    assert env == {"I_MPI_ADJUST_REDUCE_SCATTER_BLOCK": "3",
                   "I_MPI_ADJUST_FAILURE_ON_COLL_FALLBACK": "1"}
    # forcing settings are left out of params; a preset's own knobs stay parameters
    assert all(is_forcing_env(k) for k in env)
    assert not is_forcing_env("I_MPI_ADJUST_BCAST_NODE_KNOMIAL_RADIX")
    assert not is_forcing_env("I_MPI_ADJUST_LATENCY")  # point-to-point: no preset


def test_a_fallback_is_one_line_naming_the_forced_preset() -> None:
    out = ("Assertion failed in file ../../src/mpid/ch4/shm/posix/posix_coll_globals_default.c"
           " at line 62: I_MPI_ADJUST_FAILURE_ON_COLL_FALLBACK BCAST: algo #6 has fallback\n"
           "Abort(1) on node 1: Internal error\n")
    why = impi.fallback_problem(out, {"I_MPI_ADJUST_BCAST": "12"})
    assert why is not None and "\n" not in why
    assert "I_MPI_ADJUST_BCAST=12" in why and "preset12" in why and "#6" in why
    assert "did not take effect" in why
    other = impi.fallback_problem(out.replace("BCAST", "BARRIER"), {"I_MPI_ADJUST_BCAST": "3"})
    assert other is not None and "own barrier choice" in other
    assert impi.fallback_problem("Abort(1) on node 1", {}) is None


@given(st.binary(max_size=2000))
def test_any_output_gives_no_reason_or_one_bounded_line(data: bytes) -> None:
    why = impi.fallback_problem(data.decode("utf-8", "replace"), {})
    assert why is None or ("\n" not in why and len(why) < 400)


def test_forcing_in_the_environment_is_named_in_one_line() -> None:
    why = impi.environment_problem({"I_MPI_ADJUST_BCAST": "3", "PATH": "/bin"})
    assert why is not None and "\n" not in why
    assert why.startswith("I_MPI_ADJUST_BCAST='3' in the environment") and '"preset3"' in why
    assert impi.environment_problem({"I_MPI_ADJUST_BCAST_NODE_KNOMIAL_RADIX": "4",
                                     "I_MPI_ADJUST_FAILURE_ON_COLL_FALLBACK": "1"}) is None


def test_the_spec_installs_both_wheels() -> None:
    spec = parse_spec("impi==2021.18.1")
    assert (spec.key, spec.packages) == ("impi-2021.18.1",
                                         ["impi-rt==2021.18.1", "impi-devel==2021.18.1"])
    with pytest.raises(UserError, match=r"must name one release with '==', e\.g\. impi=="):
        parse_spec("impi>=2021")


# --- the real Intel MPI ----------------------------------------------------------------

@pytest.fixture(scope="module")
def prefix() -> Path:
    return private_mpi("impi")


@pytest.mark.slow
def test_discovery_version_environment_and_compiler(prefix: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    mpi = find_mpi(prefix)
    want = TEST_MPIS["impi"].split("==")[1]
    assert (mpi.implementation, mpi.version) == ("impi", want)
    assert mpi.info_tool == prefix / "bin" / "impi_info"
    assert resolve_mpi(TEST_MPIS["impi"]).bindir == mpi.bindir
    env = launcher_env(mpi)
    assert env["I_MPI_ROOT"] == str(prefix)
    assert env["LD_LIBRARY_PATH"].split(":")[0] == str(prefix / "lib")
    # the install wrote its prefix into the wrappers: mpicc works without I_MPI_ROOT
    show = subprocess.run([str(mpi.mpicc), "-show"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, check=True).stdout
    assert f"-I\"{prefix}/include\"" in show and "I_MPI_SUBSTITUTE_INSTALLDIR" not in show
    marker = json.loads((prefix / ".collbench-mpi.json").read_text())
    assert marker["environment"]["I_MPI_ROOT"] == str(prefix)
    assert main(["mpi", "--mpi", str(prefix), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["implementation"] == "impi" and shown["environment"]["I_MPI_ROOT"]


@pytest.mark.slow
def test_the_catalogue_is_impi_info_s_ranges_and_other_ids_are_refused(
        prefix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mpi = find_mpi(prefix)
    info = subprocess.run([str(mpi.info_tool), "-v", "I_MPI_ADJUST_BCAST"], capture_output=True,
                          text=True, errors="replace", env=launcher_env(mpi), check=False)
    m = re.search(r"range:\s*0-(\d+)", info.stdout)
    assert m, info.stdout + info.stderr
    high = int(m.group(1))
    catalog = load_catalog(mpi)
    assert catalog.implementation == "impi" and "impi_info" in catalog.source
    assert [a.id for a in catalog.of("bcast")] == list(range(1, high + 1))
    blocking = [c for c, v in COLLECTIVES.items() if not v.nonblocking and v.kind.name != "P2P"]
    assert all(catalog.of(c) for c in blocking)  # every blocking collective has presets
    assert catalog.resolve("bcast", high, "x").name == f"preset{high}"
    with pytest.raises(UserError) as e:
        catalog.resolve("bcast", high + 1, "spec.toml: measure.algorithms[1]")
    assert "\n" not in str(e.value) and f"is not a bcast algorithm of impi {mpi.version}" \
        in str(e.value)
    assert main(["algorithms", "bcast", "--mpi", str(prefix), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["algorithm"] for r in rows] == ["default", *(f"preset{i}"
                                                          for i in range(1, high + 1))]


@pytest.mark.slow
def test_each_version_s_catalogue_refuses_the_ids_it_lacks(prefix: Path) -> None:
    """Two versions, two catalogues, each from its own impi_info: an id that 2021.18.1
    added is a preset there and refused, in one line, by 2021.17.2."""
    old, new = (load_catalog(find_mpi(p)) for p in (private_mpi("impi17"), prefix))
    added = [(c, a.id) for c in COLLECTIVES for a in new.of(c)
             if a.id is not None and a.id not in {b.id for b in old.of(c)}]
    assert added  # 2021.18.1 has more alltoall presets than 2021.17.2 (14 to 18)
    for coll, ident in added:
        assert new.resolve(coll, ident, "x").name == f"preset{ident}"
        with pytest.raises(UserError) as e:
            old.resolve(coll, ident, "s.toml: measure.algorithms[0]")
        assert "\n" not in str(e.value) and "impi 2021.17.2; valid: default" in str(e.value)
