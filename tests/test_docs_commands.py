"""Every `collbench ...` command shown in README.md and docs/*.md runs as written.

Each command in a shell code block is (1) parsed by collbench's own argparse parser, so a
renamed command or option in the docs fails here, and (2) run, in the order a reader meets
it (README.md, then docs/*.md by name, each top to bottom), in one folder that starts like
a fresh checkout (examples/ and benchmarks/ only): whatever a command reads, a command
shown before it made, exactly as a reader's would. A command that cannot run here is in
SKIP with its reason, and the test fails when more commands are skipped than MAX_SKIPPED:
new docs run, or say why not on purpose. Measurements that take minutes with a real MPI
run here as written with `--backend fake` added (FAKE, each with its reason): the same
spec, folder and rows for the commands after them.

Reading conventions: `[...]` marks optional parts (a synopsis): they are left out; `# ...`
ends a command; `> file` sends its output to a file.

Commands run in this process (`collbench.cli.main`), not as subprocesses: 150 Python
start-ups would cost a minute.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from collbench.cli import main, parser
from collbench.spec import parse_spec

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_BLOCKS = ("", "sh", "bash", "shell", "console")


@dataclass(frozen=True)
class Shown:
    where: str  # file:line
    argv: tuple[str, ...]  # after "collbench"
    stdout_to: str | None  # `> file`
    prompt: bool = False  # shown as `$ collbench ...`

    @property
    def text(self) -> str:
        return shlex.join(["collbench", *self.argv])


def _commands() -> list[Shown]:
    found = []
    for doc in DOCS:
        block, lang, pending, prompt = False, "", "", False
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            fence = re.match(r"^\s*```(\S*)", line)
            if fence:
                block, lang, pending = not block, fence.group(1), ""
                continue
            if not block or lang not in SHELL_BLOCKS:
                continue
            prompt = prompt if pending else line.strip().startswith("$ ")
            text = pending + line.strip().removeprefix("$ ")
            pending = ""
            if text.endswith("\\"):
                pending = text[:-1] + " "
                continue
            if text.startswith("collbench "):
                found.append(_shown(f"{doc.name}:{number}", text, prompt))
    return found


def _shown(where: str, text: str, prompt: bool = False) -> Shown:
    text = re.sub(r"\s\[[^\]]*\]", "", text)  # synopsis: optional parts
    words = shlex.split(text, comments=True)[1:]
    stdout_to = None
    if ">" in words:
        at = words.index(">")
        words, stdout_to = words[:at], words[at + 1]
    return Shown(where, tuple(words), stdout_to, prompt)


COMMANDS = _commands()

# Commands that cannot run on this machine, by pattern over the command text, with why.
SKIP: dict[str, str] = {
    r"--backend slurm|run spec\.toml -o results/x$":
        "submits to a live Slurm controller (tests/launch/slurm runs it against real daemons)",
    r"examples/hosts\.toml|--hostfile hosts\.txt|tune results/hosts|--han tuned\.conf\.han":
        "needs the hosts of examples/hosts.toml up (`sudo scripts/hosts-up.sh "
        "/tmp/collbench-hosts`, root; tests/launch/test_hosts.py runs it on them)",
    r"\bmpi install\b": "downloads and builds an MPI from PyPI (minutes, network)",
    r"--impi\b|impi_bcast_np2|results/impi-bcast\b":
        "an Intel MPI campaign and the file tune writes from it (tests/tune/"
        "test_impi_tuning.py writes, checks and runs one)",
    r"rules verify|tune validate":
        "real MPI launches of every rule, minutes (tests/tune/test_verify_mpi.py, "
        "test_validate.py run them)",
    r"tune examples/local\.toml --adaptive":
        "an adaptive campaign of real MPI launches, minutes (tests/tune/test_adaptive.py)",
    r"study examples/mca-study\.toml -o|study results/study":
        "an MCA study: about 110 real launches, 3 minutes (tests/study/test_study_cli.py)",
    r"model loggp":
        "the PLogP benchmark with real MPI, 10-20 s per level, or on two nodes "
        "(tests/models/test_loggp.py, test_loggp_results.py run it)",
    r"platform calibrate":
        "SimGrid calibration: simulations of tens of seconds (tests/platforms/"
        "test_calibrate*.py run it)",
    r"run examples/simgrid\.toml|results/probe\b|probe\.toml":
        "SimGrid simulations of 16 ranks, 15 s and more (tests/launch/test_simgrid.py)",
    r"shared/data/orfeo-|\b(collectives|pingpong)\.csv\b|results/(epyc|thin)":
        "a published data set outside the repository (tests/ingest/test_table.py and "
        "tests/platforms/test_builtin_recipes.py run these on ../shared/data)",
    r"^collbench model (predict|jacobi)|--against (results/(predicted|model48)|\S+\.p2p"
    r"\.toml)|--model |--p2p |results/(han-5\.0|tuned-4\.1|model48)\b":
        "a p2p model with a node level: ping-pongs between two nodes (tests/models/"
        "test_model_cli.py runs docs/models.md in order on three-level folders)",
    r"examples/(jacobi|ring|program)\.toml":
        "an MPI mini-app at 1-4 ranks, real launches (the fake backend runs programs as "
        "singletons; tests/apps/test_examples.py runs these specs)",
    r"^collbench report ":
        "figures: 10 s and more per report (tests/report/test_html.py and "
        "test_figures.py render them from folders like these)",
    r"^collbench run -c bcast (-m|--algorithms)":
        "the quick look: a real MPI run of minutes that nothing below reads "
        "(tests/test_cli_oneliner.py runs these options with the fake backend)",
    r"--adaptive --precision":
        "replays per-iteration samples, which a campaign stores with samples = true "
        "(tests/tune/test_adaptive_precise.py)",
    r"model p2p --show machine\.p2p\.toml$":
        "shows machine.p2p.toml, which docs/models.md's `$` lines write (below)",
    r"--mpi mpich==|results/mpich\b":
        "MPICH forces one launch per algorithm: about 100 launches (tests/tune/"
        "test_mpich.py writes and checks the JSON file)",
    r"osu_mbw_mr\.txt":
        "the reader's own osu_mbw_mr output (tests/platforms/test_multipair.py ingests one "
        "and calibrates from it)",
    r"bench\.toml|baseline/":
        "a CI job's own spec and reference folder (docs/ci.md runs the same commands above "
        "on examples/fake.toml)",
}
# Grows only on purpose: a command that stops running is a failure, not a new skip.
# +1: orfeo-epyc's cross-processor ping-pong, +1: its 2-rank probe (test_builtin_recipes
# runs both), +2: an osu_mbw_mr output to ingest and the calibration from it (docs/simgrid.md,
# "Multi-pair bandwidth"; tests/platforms/test_multipair.py runs both)
MAX_SKIPPED = 110

# Run as written with `--backend fake` added: a real MPI campaign of a minute or more
# here; the commands after it read the folder it makes.
FAKE: dict[str, str] = {
    r"^collbench run (examples/(quickstart|nonblocking|mpis)\.toml|-c) ":
        "a real MPI campaign of a minute or more (`make run`; tests/test_cli_oneliner.py, "
        "tests/test_nonblocking_mpi.py, tests/test_multi_mpi_run.py measure with MPI)",
}


# Pages whose `$ collbench` lines another test runs in order, on folders made for it.
PROMPT_RUN_BY = {
    "models.md": "tests/models/test_model_cli.py::test_every_documented_command_runs runs "
                 "docs/models.md's `$` lines in order on three-level folders",
}


def _skip_reason(cmd: Shown) -> str | None:
    if cmd.prompt and (by := PROMPT_RUN_BY.get(cmd.where.split(":")[0])):
        return by
    return next((why for pattern, why in SKIP.items() if re.search(pattern, cmd.text)), None)


def _fake_reason(cmd: Shown) -> str | None:
    return next((why for pattern, why in FAKE.items() if re.search(pattern, cmd.text)), None)


def test_docs_show_commands() -> None:
    assert len(COMMANDS) > 60, "the extraction found too few commands"
    assert any(c.where.startswith("README.md") for c in COMMANDS)


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.where for c in COMMANDS])
def test_every_command_parses(cmd: Shown) -> None:
    try:
        args = parser().parse_args(list(cmd.argv))
    except SystemExit as stop:
        pytest.fail(f"{cmd.where}: `{cmd.text}` is not a valid command line (exit "
                    f"{stop.code})")
    assert callable(args.func)


RUN = [c for c in COMMANDS if _skip_reason(c) is None]
SKIPPED = [c for c in COMMANDS if _skip_reason(c) is not None]


def test_skips_are_few_and_each_has_a_reason() -> None:
    for cmd in SKIPPED:
        print(f"skipped {cmd.where}: {cmd.text}: {_skip_reason(cmd)}")
    assert len(SKIPPED) <= MAX_SKIPPED, [c.text for c in SKIPPED]
    for pattern in SKIP:  # a pattern no command needs any more goes
        assert any(re.search(pattern, c.text) for c in COMMANDS), pattern


def _collbench(cwd: Path, cmd: Shown) -> None:
    argv = list(cmd.argv) + (["--backend", "fake"] if _fake_reason(cmd) else [])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    assert code == 0, f"{cmd.where}: {shlex.join(['collbench', *argv])}: exit {code}\n" \
                      f"{err.getvalue()[-2000:]}{out.getvalue()[-1000:]}"
    if cmd.stdout_to is not None:
        assert out.getvalue(), f"{cmd.where}: nothing to write to {cmd.stdout_to}"
        (cwd / cmd.stdout_to).write_text(out.getvalue())


@pytest.mark.slow
def test_commands_run_as_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh checkout: examples/ and benchmarks/; everything else a command made."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copytree(ROOT / "benchmarks", tmp_path / "benchmarks",
                    ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    monkeypatch.chdir(tmp_path)
    took, seen = [], set()
    for cmd in RUN:
        if (cmd.argv, cmd.stdout_to) in seen:  # a page repeats a command another ran
            continue
        seen.add((cmd.argv, cmd.stdout_to))
        start = time.monotonic()
        _collbench(tmp_path, cmd)
        took.append((time.monotonic() - start, cmd.where))
    for seconds, where in sorted(took, reverse=True)[:10]:
        print(f"{seconds:6.2f} s  {where}")


# One runnable spec per backend; hosts.toml belongs to docs/hosts.md (its own tests).
BACKEND_EXAMPLES = ("local", "fake", "simgrid", "slurm")


@pytest.mark.parametrize("name", BACKEND_EXAMPLES)
def test_each_backend_has_an_example_that_says_how_to_run_it(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = ROOT / "examples" / f"{name}.toml"
    text = path.read_text()
    assert text.startswith("# ") and f"collbench run examples/{name}.toml" in text
    spec = parse_spec(text, str(path))
    assert spec.run.backend == name
    if name != "slurm":  # planning for Slurm asks srun (tests/launch/slurm, real daemons)
        assert main(["plan", str(path)]) == 0
        assert f"campaign {spec.campaign.name}:" in capsys.readouterr().out


def test_the_hosts_example_says_how_to_bring_its_hosts_up() -> None:
    text = (ROOT / "examples" / "hosts.toml").read_text()
    assert "scripts/hosts-up.sh /tmp/collbench-hosts" in text
    assert (ROOT / "scripts" / "hosts-up.sh").exists()
    assert 'hostfile = "/tmp/collbench-hosts/hosts.txt"' in text


def test_slurm_script_needs_no_live_controller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`slurm script` where srun cannot reach slurmctld (a login node with it down, a
    laptop): the script is written with the MPI's usual plugin, and a note says so."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text("#!/bin/sh\necho 'srun: fatal: Could not establish a configuration "
                    "source' >&2\nexit 1\n")
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    out = tmp_path / "results"
    assert main(["slurm", "script", str(ROOT / "examples" / "slurm.toml"), "-o", str(out)]) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith("#!/bin/bash") and "srun --mpi=pmix" in printed.out
    assert "Could not establish a configuration source" in printed.err
    assert "the script uses srun --mpi=pmix" in printed.err
    # a run still needs the controller: it fails before making the folder
    code = main(["run", str(ROOT / "examples" / "slurm.toml"), "-o", str(tmp_path / "run")])
    assert code == 2 and not (tmp_path / "run").exists()
    assert "srun --mpi=list failed" in capsys.readouterr().err
