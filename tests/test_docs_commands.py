"""Every `collbench ...` command shown in README.md and docs/*.md is a real command.

Each command in a shell code block is (1) parsed by collbench's own argparse parser, so a
renamed command or option in the docs fails here, and (2) either run here as shown (in a
scratch folder, with exit status 0) or named in SKIP with the reason it cannot run here.
A command in neither list fails the test: new docs must say which it is.

Reading conventions: `[...]` marks optional parts (a synopsis): they are left out; `# ...`
ends a command; `> file` sends its output to a file.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
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

    @property
    def text(self) -> str:
        return shlex.join(["collbench", *self.argv])


def _commands() -> list[Shown]:
    found = []
    for doc in DOCS:
        block, lang, pending = False, "", ""
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            fence = re.match(r"^\s*```(\S*)", line)
            if fence:
                block, lang, pending = not block, fence.group(1), ""
                continue
            if not block or lang not in SHELL_BLOCKS:
                continue
            text = pending + line.strip().removeprefix("$ ")
            pending = ""
            if text.endswith("\\"):
                pending = text[:-1] + " "
                continue
            if text.startswith("collbench "):
                found.append(_shown(f"{doc.name}:{number}", text))
    return found


def _shown(where: str, text: str) -> Shown:
    text = re.sub(r"\s\[[^\]]*\]", "", text)  # synopsis: optional parts
    words = shlex.split(text, comments=True)[1:]
    stdout_to = None
    if ">" in words:
        at = words.index(">")
        words, stdout_to = words[:at], words[at + 1]
    return Shown(where, tuple(words), stdout_to)


COMMANDS = _commands()

# Commands that cannot run here, by pattern over the command text, each with its reason.
SKIP: dict[str, str] = {
    r"--backend slurm|^collbench slurm |examples/slurm\.toml|inside salloc":
        "needs a Slurm cluster (tests/launch/slurm runs them against real daemons)",
    r"run spec\.toml -o results/x$": "inside a Slurm allocation (docs/slurm.md)",
    r"\bbench\.toml\b|baseline/": "a CI job's own spec and reference folder (docs/ci.md; the "
                                     "same commands run above on examples/fake.toml)",
    r"\bspec\.toml\b|\bprobe\.toml\b":
        "spec.toml/probe.toml stand for the reader's own spec",
    r"\b(collectives|pingpong)\.csv\b|shared/data/orfeo-|results/(epyc|thin)|epyc-shape\.toml":
        "a published data set outside the repository (tests/ingest/test_table.py and "
        "tests/platforms/test_builtin_recipes.py run these on ../shared/data)",
    r"results/(pp|jacobi|probe|model48|predicted|sim|study|hosts)\b|RESULTS":
        "a results folder the reader measured (real runs, studies, other machines)",
    r"results/(ring|prog)\b|examples/(nonblocking|ring|program|hosts)\.toml":
        "a real MPI campaign of minutes (tests/test_nonblocking_mpi.py, tests/apps)",
    r"--baseline mpi=|--measured-mpi|--mpich":
        "results of several MPIs, or of MPICH (tests/test_multi_mpi_run.py measures them)",
    r"model (fit|scaling) results/real":
        "fits over many process counts, tens of seconds each (tests/models run them)",
    r"^collbench run -c bcast -m 1:1M -n 2$":
        "a real MPI run of minutes (tests/test_cli_oneliner.py runs the quick look with "
        "the fake backend)",
    r"examples/quickstart\.toml -o results/quick$":
        "the real quickstart takes a minute (`make run`); run here with --backend fake",
    r"\b(machine|orfeo|vendor|m|here)\.p2p\.toml\b|--model\b|\bloggp\b":
        "a p2p model measured on a cluster (tests/models fit one)",
    r"rules check --han tuned\.conf\.han":
        "the han file `collbench tune results/hosts` writes (tests/tune/test_han.py runs "
        "rules check --han on one)",
    r"rules verify|tune validate|--adaptive":
        "real MPI launches of minutes (tests/tune runs them)",
    r"study examples/mca-study\.toml -o": "an MCA study: many real launches",
    r"platform new mycluster\.toml|--from mycluster\.toml":
        "mycluster.toml is the reader's own description",
    r"report results/(quick|x|nb)\b":
        "report figures take minutes here (tests/report renders one)",
    r"\bmpi install\b": "downloads and builds an MPI from PyPI (minutes, network)",
    r"--impi\b|impi_bcast_np2|results/impi-bcast\b":
        "an Intel MPI campaign and the file tune writes from it "
        "(tests/tune/test_impi_tuning.py writes, checks and runs one)",
    r"diff-mpi mpich==4\.3\.2": "MPICH 4.3.2 is not among `make mpis` (tests/analyse/"
                                  "test_mpidiff.py runs it where installed)",
    r"-o results/b$": "a real MPI run of minutes (tests/test_cli_oneliner.py runs the same "
                      "options with the fake backend)",
}


def _skip_reason(cmd: Shown) -> str | None:
    return next((why for pattern, why in SKIP.items() if re.search(pattern, cmd.text)), None)


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


def _runnable(cmd: Shown) -> bool:
    return _skip_reason(cmd) is None


RUN = [c for c in COMMANDS if _runnable(c)]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder like a fresh checkout's: the examples, and results/quick measured from
    examples/quickstart.toml with the fake backend (the real one takes a minute). The
    reader's own folders the docs read are stand-ins measured the same way (results/x,
    results/real: the quickstart's; results/nb: examples/nonblocking.toml), and the
    reader's OSU/IMB output files (osu_bcast.out, ...) the samples in examples/."""
    here = tmp_path_factory.mktemp("docs")
    shutil.copytree(ROOT / "examples", here / "examples")
    _collbench(here, ["run", "examples/quickstart.toml", "--backend", "fake",
                      "-o", "results/quick"])
    for name in STAND_INS:
        shutil.copytree(here / "results" / "quick", here / "results" / name)
    _collbench(here, ["run", "examples/nonblocking.toml", "--backend", "fake",
                      "-o", "results/nb"])
    for sample in (ROOT / "examples").glob("*.out"):
        shutil.copy(sample, here / sample.name)
    return here


STAND_INS = ("x", "real")


def _collbench(cwd: Path, argv: list[str], stdout_to: str | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", "collbench", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"collbench {shlex.join(argv)}: exit {done.returncode}\n" \
                                 f"{done.stderr[-2000:]}"
    if stdout_to is not None:
        (cwd / stdout_to).write_text(done.stdout)
    return done.stdout


# The order a reader follows: tune writes tuned.rules before `rules check` reads it.
def _order(cmd: Shown) -> int:
    return 1 if cmd.argv[:2] == ("rules", "check") else 0


@pytest.mark.slow
def test_commands_run_as_shown(scratch: Path) -> None:
    assert len(RUN) >= 45, [c.text for c in RUN]
    for cmd in sorted(RUN, key=_order):
        _collbench(scratch, list(cmd.argv), cmd.stdout_to)


def test_every_command_is_run_or_skipped_with_a_reason() -> None:
    for cmd in COMMANDS:
        reason = _skip_reason(cmd)
        assert reason is None or len(reason) > 20, cmd.where
    assert {c.where for c in RUN} | {c.where for c in COMMANDS if _skip_reason(c)} == \
        {c.where for c in COMMANDS}


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
