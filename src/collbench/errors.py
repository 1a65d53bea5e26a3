"""User-facing errors: one clear line, exit status 2, never a traceback."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class UserError(Exception):
    """A problem with the user's input or environment that the user can fix."""

    exit_code = 2


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    """' (did you mean X?)' when a close match exists, else ''."""
    match = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {match[0]}?)" if match else ""


def choice_error(where: str, what: str, value: object, choices: Iterable[object]) -> UserError:
    """'<where>: <what> 'v' is not valid; valid: a, b, c (did you mean a?)'."""
    names = [str(c) for c in choices]
    return UserError(
        f"{where}: {what} {value!r} is not valid; valid: {', '.join(names)}"
        f"{did_you_mean(str(value), names)}"
    )
