"""Hostile input: every reader (spec, OSU/IMB output, rules file) on arbitrary bytes, numbers
out of any sane range, files that are not files, runaway nesting, a plan too large to
expand, forcing settings smuggled into [mca], and batch-script injection. Each ends in one
line naming the file and field with exit status 2, or in a complete result."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench.cli import main
from collbench.errors import UserError
from collbench.ingest import parse
from collbench.spec import load_spec, parse_spec
from collbench.tune.check import check
from collbench.tune.rules import parse_rules
from tests.backend_support import MINIMAL_SPEC
from tests.launch.slurm.util import slurm_backend
from tests.launch.slurm.util import spec as slurm_spec

OSU = Path(__file__).parent / "data" / "samples" / "osu-7.4"


def _one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("collbench: error: ") and err.count("\n") == 0, err
    for needle in needles:
        assert needle in err, err
    return err


# --- arbitrary bytes ---------------------------------------------------------------------

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_spec_reader_on_arbitrary_bytes(data: bytes) -> None:
    try:
        parse_spec(data.decode("utf-8", errors="replace"), "fuzz.toml")
    except UserError as e:
        assert "\n" not in str(e) and str(e).startswith("fuzz.toml")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("[]{}=\"',.#\n abc123_-:\\tinfnaTFtruefalse")),
               max_size=400))
def test_spec_reader_on_toml_shaped_text(text: str) -> None:
    try:
        parse_spec(MINIMAL_SPEC + text, "fuzz.toml")
    except UserError as e:
        assert "\n" not in str(e) and str(e).startswith("fuzz.toml")


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=600))
def test_rules_reader_on_arbitrary_bytes(data: bytes) -> None:
    """`rules check` reads any byte sequence as Open MPI would: a report, never a crash
    (non-ASCII digits such as b'\\xb2' included)."""
    reading = parse_rules(data)
    assert all("\n" not in p.message for p in reading.problems)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=1500))
def test_benchmark_output_reader_on_arbitrary_bytes(data: bytes) -> None:
    try:
        parse(data.decode("utf-8", errors="replace"), "fuzz.out", "auto", "bcast")
    except UserError as e:
        assert "\n" not in str(e)


def test_rules_check_on_non_ascii_digits(tmp_path: Path) -> None:
    f = tmp_path / "r.rules"
    f.write_bytes(b"1\n7\n1\n\xb2\n1\n0 3 0 0\n")
    from collbench.catalog.algorithms import Catalog
    from collbench.catalog.openmpi import fallback

    report = check(f, Catalog("openmpi", "5.0.11", "test", fallback()))
    assert not report.ok


# --- numbers out of range ----------------------------------------------------------------

@pytest.mark.parametrize(("measure", "run", "needle"), [
    ("nprocs = 2097152", "", "measure.nprocs"),
    ("nprocs = 2\nsizes = \"2G\"", "", "above 1G"),
    ("nprocs = 2\nsizes = 99999999999999999999999", "", "measure.sizes"),
    ("nprocs = 2\niterations = 9999999999", "", "measure.iterations"),
    ("nprocs = 2", "repetitions = 1000000", "run.repetitions"),
    ("nprocs = 2", "timeout = inf", "run.timeout"),
    ("nprocs = 2", "timeout = nan", "run.timeout"),
    ("nprocs = 2", "timeout = 1e12", "run.timeout"),
    ("nprocs = 2", "seed = 99999999999999999999", "run.seed"),
])
def test_out_of_range_numbers_are_refused_at_plan(tmp_path: Path, measure: str, run: str,
                                                  needle: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(f'[campaign]\nname = "x"\n[measure]\ncollectives = "bcast"\n{measure}\n'
                    f'[run]\nbackend = "fake"\n{run}\n')
    assert main(["plan", str(spec)]) == 2
    _one_line_error(capsys, str(spec), needle)


def test_a_huge_plan_is_refused_by_its_size_not_by_memory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.toml"
    counts = ", ".join(str(n) for n in range(2, 2000))
    spec.write_text(f'[campaign]\nname = "x"\n[measure]\ncollectives = ["bcast", "reduce"]\n'
                    f'algorithms = "all"\nsizes = "1:1G"\nnprocs = [{counts}]\n'
                    '[mca.sweep]\nbtl_a = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n'
                    '[run]\nbackend = "fake"\nrepetitions = 1000\n')
    start = time.monotonic()
    assert main(["plan", str(spec)]) == 2
    assert time.monotonic() - start < 20
    _one_line_error(capsys, "the plan would hold up to", "points")


def test_command_line_numbers_are_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, needle in ((["tune", "validate", "x.rules", "-n", "0"], "--nprocs"),
                         (["tune", "validate", "x.rules", "-n", "2", "--repetitions",
                           "99999999999"], "--repetitions"),
                         (["tune", "validate", "x.rules", "-n", "2", "--timeout", "inf"],
                          "--timeout"),
                         (["show", "r", "--nprocs", "-3"], "--nprocs"),
                         (["compare", "r", "--confidence", "1.5"], "--confidence")):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        _one_line_error(capsys, needle)


def test_ingest_numbers_are_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(OSU / "osu_bcast_np2.txt"), "--nprocs", "9" * 30, "-o",
                 str(tmp_path / "r")]) == 2
    _one_line_error(capsys, "--nprocs")


# --- files that are not files ------------------------------------------------------------

def test_a_fifo_spec_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.toml"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "collbench.cli", "plan", str(fifo)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "is a FIFO" in done.stderr


@pytest.mark.parametrize("cmd", [["plan"], ["ingest", "--nprocs", "2", "-o", "OUT"],
                                 ["rules", "check"]])
def test_devices_and_huge_files_are_refused(tmp_path: Path, cmd: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big"
    with big.open("wb") as f:
        f.truncate(200 * 1024 * 1024)  # sparse: takes no disk
    for target, needle in (("/dev/zero", "character device"), (str(big), "at most")):
        argv = [cmd[0], *cmd[1:2], target, *cmd[2:]] if cmd[0] == "rules" else \
            [cmd[0], target, *[str(tmp_path / "o") if a == "OUT" else a for a in cmd[1:]]]
        assert main(argv) == 2
        _one_line_error(capsys, needle)


def test_deeply_nested_toml_is_one_line(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text("a = " + "[" * 50_000 + "]" * 50_000 + "\n")
    assert main(["plan", str(spec)]) == 2
    _one_line_error(capsys, "nested too deeply")


# --- what must not be taken at face value ------------------------------------------------

def test_forcing_settings_in_mca_are_recorded_as_what_they_force(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """[mca] may force an algorithm (a study of a forced pipeline's segment size does): the
    rows then say which algorithm and segment size ran, never "default"."""
    spec = tmp_path / "spec.toml"
    spec.write_text('[campaign]\nname = "f"\n[measure]\ncollectives = "bcast"\n'
                    'algorithms = "default"\nsizes = [8, 64]\nnprocs = 2\n[mca]\n'
                    'fixed = {coll_tuned_use_dynamic_rules = 1, '
                    'coll_tuned_bcast_algorithm = "pipeline", '
                    'coll_tuned_bcast_algorithm_segmentsize = "1K"}\n'
                    '[mca.sweep]\ncoll_tuned_bcast_algorithm_chain_fanout = [2, 4]\n')
    assert main(["plan", str(spec), "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    got = {(p["algorithm"], p["algorithm_id"], p["segsize"], p["fanout"], la["selection"])
           for la in plan["launches"] for p in la["points"]}
    assert got == {("pipeline", 3, 1024, 2, "launch"), ("pipeline", 3, 1024, 4, "launch")}
    spec.write_text(spec.read_text().replace("coll_tuned_use_dynamic_rules = 1, ", ""))
    assert main(["plan", str(spec), "--format", "json"]) == 0  # without dynamic rules Open
    plan = json.loads(capsys.readouterr().out)  # MPI ignores it: default is the truth
    assert {p["algorithm"] for la in plan["launches"] for p in la["points"]} == {"default"}


def test_an_osu_file_with_a_repeated_size_is_refused(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    twice = tmp_path / "twice.out"
    text = (OSU / "osu_bcast_np2.txt").read_text()
    twice.write_text(text + text)
    assert main(["ingest", str(twice), "--nprocs", "2", "-o", str(tmp_path / "r")]) == 2
    _one_line_error(capsys, "twice.out:", "again", "split the file")
    assert not (tmp_path / "r").exists()


@pytest.mark.mpi
def test_a_placement_mpirun_refuses_is_refused_at_plan(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text('[campaign]\nname = "x"\n[measure]\ncollectives = "bcast"\nsizes = [8]\n'
                    'nprocs = 2\nmap_by = "core"\nbind_to = "socket"\n')
    assert main(["plan", str(spec)]) == 2
    _one_line_error(capsys, "measure.map_by/bind_to", "--bind-to socket")


# --- batch-script injection --------------------------------------------------------------

PAYLOADS = ["x\ntouch PWNED", "x\rtouch PWNED", "x\x00y", "$(touch PWNED)", "`touch PWNED`",
            "'; touch PWNED; '", "x\x1b[2J", "a\u2028b"]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_nothing_from_the_user_ends_a_line_of_a_batch_script(tmp_path: Path,
                                                             payload: str) -> None:
    """Each payload goes where users put text (the results path, sbatch extras, MCA values):
    it is refused when it can end a line, else quoted so that `bash -n` accepts the script
    and running it creates no file named PWNED."""
    from tests.launch.slurm.util import launch

    pmix = 'srun_mpi = "pmix"\n'
    payload = payload.replace("\0", "")  # no path or argument can hold NUL at all
    cases = {
        "results path": (pmix, tmp_path / payload),
        "extra_sbatch": (pmix + f"extra_sbatch = [{_toml_str('--comment=' + payload)}]",
                         tmp_path / "r"),
    }
    for what, (slurm_table, root) in cases.items():
        la = launch(mca=(("btl", payload),))
        try:
            sp = slurm_spec(slurm_table)
            text = slurm_backend(sp, root).scripts([la], Path("/k/kernel"), ())[0]
        except UserError as e:
            assert any(ord(c) < 0x20 or ord(c) == 0x7F for c in payload), (what, e)
            assert "\n" not in str(e) and ("control character" in str(e)
                                            or "one sbatch option" in str(e))
            continue
        assert not any(ord(c) < 0x20 for c in payload), what
        script = tmp_path / "job.sh"
        script.write_text(text)
        assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
        for line in text.splitlines():
            assert not line.lstrip().startswith("touch"), line


def _toml_str(value: str) -> str:
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}"
                         for c in value) + '"'


def test_slurm_script_refuses_a_results_path_with_a_newline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("sbatch") is None:
        pytest.skip("no Slurm client tools")
    spec = tmp_path / "spec.toml"
    spec.write_text(MINIMAL_SPEC + '[run]\nbackend = "slurm"\n[run.slurm]\nnodes = 1\n'
                    'srun_mpi = "pmix"\n')
    out = tmp_path / "res\n#SBATCH --wrap=touch PWNED"
    assert main(["slurm", "script", str(spec), "-o", str(out)]) == 2
    _one_line_error(capsys, "control character")
    assert not (tmp_path / "PWNED").exists()


def test_spec_loader_reads_only_regular_files(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is a folder"):
        load_spec(tmp_path)
