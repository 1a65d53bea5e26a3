"""`collbench completion bash|zsh|fish`: a shell completion script made from the parser.

shtab writes bash and zsh scripts from argparse itself, so completion cannot fall behind
the options, and the script is static (argcomplete would start Python at every Tab
press). shtab has no fish; fish gets the commands and their long options from here.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from collbench.commands import options

SHELLS = ("bash", "zsh", "fish")


def add_parser(sub: argparse._SubParsersAction[Any], root: argparse.ArgumentParser) -> None:
    c = sub.add_parser(
        "completion", help="print a shell completion script (bash, zsh, fish)",
        description="Print a completion script for collbench. bash: `source <(collbench "
        "completion bash)` (or save it as ~/.local/share/bash-completion/completions/"
        "collbench); zsh: save `collbench completion zsh` as _collbench in a folder on "
        "$fpath; fish: `collbench completion fish > ~/.config/fish/completions/"
        "collbench.fish`.")
    c.add_argument("shell", choices=SHELLS, help="the shell the script is for")
    options.add_output(c, "write the script to this file instead of standard output")
    c.set_defaults(func=lambda args: cmd_completion(root, args))


def cmd_completion(root: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    text = script(root, args.shell)
    if args.output is not None:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def script(root: argparse.ArgumentParser, shell: str) -> str:
    if shell == "fish":
        return _fish(root)
    import shtab  # only this command needs it

    return str(shtab.complete(root, shell=shell))


def _fish(root: argparse.ArgumentParser) -> str:
    lines = ["# fish completion for collbench (collbench completion fish)",
             "complete -c collbench -f"]
    for action in root._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        names = " ".join(action.choices)
        helps = {a.dest: a.help or "" for a in action._choices_actions}
        for name, parser in action.choices.items():
            lines.append(f"complete -c collbench -n 'not __fish_seen_subcommand_from {names}' "
                         f"-a {name} -d {_quote(helps.get(name) or name)}")
            lines.extend(f"complete -c collbench -n '__fish_seen_subcommand_from {name}' "
                         f"-l {flag[2:]}"
                         for opt in parser._actions for flag in opt.option_strings
                         if flag.startswith("--"))
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    """A fish single-quoted string: only backslash and quote are special inside."""
    return "'" + " ".join(text.split()).replace("\\", "\\\\").replace("'", "\\'") + "'"
