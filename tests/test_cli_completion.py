"""`collbench completion`: the scripts complete commands and options in a real shell."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from collbench.cli import main

BASH = shutil.which("bash")


def _complete_bash(script: Path, *words: str) -> list[str]:
    """COMPREPLY after pressing Tab at the end of `words`, as bash-completion would ask."""
    assert BASH is not None
    line = " ".join(words)
    program = (f'source "{script}"; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; '
               f'COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}; '
               '_shtab_collbench; printf "%s\\n" "${COMPREPLY[@]}"')
    done = subprocess.run([BASH, "--norc", "--noprofile", "-c", program], capture_output=True,
                          text=True, timeout=60, check=True)
    return sorted(set(done.stdout.split()))


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_bash_completes_commands_and_options(tmp_path: Path) -> None:
    script = tmp_path / "collbench.bash"
    assert main(["completion", "bash", "-o", str(script)]) == 0
    assert _complete_bash(script, "collbench", "com") == ["compare", "completion"]
    assert "--resume" in _complete_bash(script, "collbench", "run", "--res")
    assert "--collective" in _complete_bash(script, "collbench", "plan", "--coll")


def test_zsh_and_fish_scripts_name_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "zsh"]) == 0
    zsh = capsys.readouterr().out
    assert zsh.startswith("#compdef collbench") and "completion" in zsh
    assert main(["completion", "fish"]) == 0
    fish = capsys.readouterr().out
    assert "-a compare -d " in fish and "-l resume" in fish
    if shutil.which("fish"):
        subprocess.run(["fish", "--no-execute", "-c", fish], check=True, timeout=60)


def test_unknown_shell_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["completion", "tcsh"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "choose from" in err
