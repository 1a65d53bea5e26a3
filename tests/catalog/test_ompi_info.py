"""One `ompi_info --all --parsable` per Open MPI and environment, shared by its readers."""

import os
import subprocess
import threading
from pathlib import Path

import pytest

from collbench.catalog import ompi_info
from collbench.catalog.openmpi import parse_libnbc, parse_ompi_info, query
from collbench.tune.writer import tuned_defaults
from tests.conftest import mpi_tool


def _counting_tool(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in ompi_info that records each start and prints a version line."""
    calls = tmp_path / "calls"
    tool = tmp_path / "ompi_info"
    tool.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\nsleep 0.2\n"
                    "echo ompi:version:full:9.8.7\n")
    tool.chmod(0o755)
    return tool, calls


def test_one_run_serves_every_reader_even_at_once(tmp_path: Path) -> None:
    tool, calls = _counting_tool(tmp_path)
    got: list[ompi_info.Listing] = []
    threads = [threading.Thread(target=lambda: got.append(ompi_info.listing(tool)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    query(tool)  # the catalog's reader: no new run either
    assert calls.read_text() == "--all --parsable\n"
    assert {id(g) for g in got} == {id(got[0])} and got[0].version() == "9.8.7"


def test_another_environment_or_a_reinstalled_tool_runs_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool, calls = _counting_tool(tmp_path)
    ompi_info.listing(tool)
    monkeypatch.setenv("OMPI_MCA_coll_tuned_priority", "77")
    ompi_info.listing(tool)
    tool.write_text(tool.read_text() + "echo again\n")  # same path, new file contents
    os.utime(tool, ns=(1, 1))
    assert "again" in ompi_info.listing(tool).text
    assert calls.read_text().count("--all") == 3


def test_a_tool_that_cannot_run_is_an_error_not_an_exception(tmp_path: Path) -> None:
    run = ompi_info.listing(tmp_path / "no-such-ompi_info")
    assert run.text == "" and run.error and run.version() is None


def test_the_real_listing_holds_what_the_narrow_queries_print(
        monkeypatch: pytest.MonkeyPatch) -> None:
    tool = mpi_tool("ompi_info")
    if tool is None:
        pytest.skip("no ompi_info")
    full = ompi_info.listing(tool)
    assert full.error is None
    version = subprocess.run([str(tool), "--version"], capture_output=True, text=True,
                             check=False).stdout
    assert f"Open MPI v{full.version()}" in version
    for component, parse in (("tuned", parse_ompi_info), ("libnbc", parse_libnbc)):
        narrow = subprocess.run([str(tool), "--param", "coll", component, "--level", "9",
                                 "--parsable"], capture_output=True, text=True,
                                check=False).stdout
        assert parse(narrow) and parse(full.text) == parse(narrow)
    # the environment is part of the key: a value set there shows in the next reading
    sixth = next(a.name for a in parse_ompi_info(full.text)["bcast"] if a.id == 6)
    assert tuned_defaults(tool)["coll_tuned_bcast_algorithm"] != sixth
    monkeypatch.setenv("OMPI_MCA_coll_tuned_bcast_algorithm", "6")
    assert tuned_defaults(tool)["coll_tuned_bcast_algorithm"] == sixth  # ompi_info's name
