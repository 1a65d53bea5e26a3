"""Every argument of every command says what it is (`--help`), issue 27."""

from __future__ import annotations

import argparse

from collbench.cli import parser


def _missing(p: argparse.ArgumentParser, path: tuple[str, ...],
             seen: set[int]) -> list[str]:
    if id(p) in seen:
        return []
    seen.add(id(p))
    out: list[str] = []
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a._name_parser_map.items():
                out += _missing(sub, (*path, name), seen)
        elif not isinstance(a, argparse._HelpAction) and not a.help:
            out.append(f"collbench {' '.join(path)} {'/'.join(a.option_strings) or a.dest}")
    return out


def test_every_argument_has_a_help_text() -> None:
    assert _missing(parser(), (), set()) == []
