"""The command line's assembly: a command line naming a command builds only that command's
parser, which parses exactly as the whole parser does, and imports nothing heavy."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from collbench.cli import COMMAND_MODULES, MODULE_OF, _module, command_module, parser


def registered(module: str) -> set[str]:
    sub = argparse.ArgumentParser().add_subparsers()
    _module(module).add_parser(sub)
    return set(sub.choices)


def test_the_command_table_is_what_the_modules_register() -> None:
    assert set(MODULE_OF.values()) == set(COMMAND_MODULES)
    for module in COMMAND_MODULES:
        assert registered(module) == {c for c, m in MODULE_OF.items() if m == module}
    whole = parser()
    commands = next(a for a in whole._actions if isinstance(a, argparse._SubParsersAction))
    assert set(commands.choices) == {*MODULE_OF, "completion"}


@pytest.mark.parametrize("argv", [
    ["run", "spec.toml", "-o", "res", "--resume", "-q"],
    ["plan", "-c", "bcast", "-n", "4"],
    ["compare", "res", "--stat", "completion", "--summary"],
    ["tune", "res", "--adaptive", "--precision", "0.1", "--min-iterations", "5", "-o", "r"],
    ["platform", "show", "jupiter"],
    ["export", "res", "-o", "x.csv"],
    ["model", "p2p", "res", "-o", "m.p2p.toml"],
])
def test_one_command_parses_as_the_whole_parser_does(argv: list[str]) -> None:
    assert command_module(argv) == MODULE_OF[argv[0]]
    assert vars(parser(command_module(argv)).parse_args(argv)) == vars(parser().parse_args(argv))


def test_no_command_or_an_unknown_one_gets_the_whole_parser(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert command_module([]) is None and command_module(["--version"]) is None
    assert command_module(["runn", "x"]) is None and command_module(["completion"]) is None
    from collbench.cli import main

    with pytest.raises(SystemExit) as bad:
        main(["runn", "spec.toml"])
    assert bad.value.code == 2
    assert "invalid choice: 'runn'" in capsys.readouterr().err


def test_collbench_run_imports_neither_statsmodels_nor_the_other_commands() -> None:
    probe = ("import sys; from collbench.cli import command_module, parser; "
             "parser(command_module(['run'])).parse_args(['run', 's.toml', '-o', 'r']); "
             "print(sorted(m for m in ('statsmodels', 'pandas', 'duckdb', 'scipy', "
             "'collbench.commands.tune', 'collbench.commands.ingest') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
