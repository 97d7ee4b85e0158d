"""Turning a terminal command line into an argv that honours the allowlist, with no shell.

No shell ever runs, so pipes, chaining, substitution, redirection, globbing and
variable expansion cannot work; rather than pass such text through literally (and
surprise the LLM), unquoted shell syntax is refused with a message saying so.
Text inside single quotes is always literal; inside double quotes ``$`` and
backticks are refused, since a shell would have expanded them.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path

from tools.base import ToolError

_UNQUOTED_FORBIDDEN = {
    ";": "';' (command chaining)",
    "&": "'&' (background or '&&' chaining)",
    "|": "'|' (pipes or '||')",
    "<": "'<' (redirection)",
    ">": "'>' (redirection)",
    "`": "backticks (command substitution)",
    "$": "'$' (variable expansion or $(...) substitution)",
    "(": "'(' (subshells)",
    ")": "')' (subshells)",
    "\n": "a newline (command separator)",
    "\r": "a carriage return",
    "*": "'*' (wildcards are not expanded; quote it to pass it as is)",
    "?": "'?' (wildcards are not expanded; quote it to pass it as is)",
    "[": "'[' (wildcards are not expanded; quote it to pass it as is)",
    "{": "'{' (brace expansion)",
    "}": "'}' (brace expansion)",
}
_DOUBLE_QUOTED_FORBIDDEN = {
    "`": "backticks (command substitution)",
    "$": "'$' (variable expansion or $(...) substitution)",
}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

NO_SHELL = (
    "No shell is used: the command runs directly as one program with its arguments, "
    "so run one command at a time without shell syntax."
)


class CommandRefused(ToolError):
    pass


def check_shell_syntax(command: str) -> None:
    """Refuse shell syntax that would not do what the caller expects without a shell."""
    quote: str | None = None
    escaped = False
    for char in command:
        if escaped:
            escaped = False
            continue
        if quote == "'":
            if char == "'":
                quote = None
            continue
        if char == "\\":
            escaped = True
            continue
        if quote == '"':
            if char == '"':
                quote = None
            elif char in _DOUBLE_QUOTED_FORBIDDEN:
                raise CommandRefused(
                    f"{_DOUBLE_QUOTED_FORBIDDEN[char]} is not supported. {NO_SHELL}"
                )
            continue
        if char in "'\"":
            quote = char
        elif char in _UNQUOTED_FORBIDDEN:
            raise CommandRefused(f"{_UNQUOTED_FORBIDDEN[char]} is not supported. {NO_SHELL}")
    if quote is not None:
        raise CommandRefused(f"unbalanced {quote} quote in the command")


def split_command(command: str) -> list[str]:
    check_shell_syntax(command)
    try:
        argv = shlex.split(command, posix=True)
    except ValueError as exc:
        raise CommandRefused(f"cannot parse the command: {exc}") from None
    if not argv:
        raise CommandRefused("the command is empty")
    if _ASSIGNMENT.match(argv[0]):
        raise CommandRefused(
            f"environment assignments like {argv[0]!r} are not allowed; run the program alone"
        )
    return argv


def _real(path: str) -> str:
    return os.path.realpath(path)


def resolve_executable(word: str, allowed: Sequence[str], search_path: str) -> str:
    """The absolute executable for ``word``, if the allowlist permits it.

    A bare name is looked up on ``search_path``. A path (``/usr/bin/../bin/rm``,
    ``./ls``) is normalised and must be the very program the allowed name finds on
    ``search_path``: a script called ``ls`` elsewhere is not ``ls``.
    """
    allow_all = "*" in allowed
    names = {a for a in allowed if "/" not in a}
    allowed_paths = {_real(a) for a in allowed if "/" in a}

    if "/" not in word:
        if not allow_all and word not in names:
            raise CommandRefused(_not_allowed(word, allowed))
        found = shutil.which(word, path=search_path)
        if found is None:
            raise CommandRefused(f"command not found: {word}")
        return found

    normalised = os.path.normpath(os.path.abspath(word))
    real = _real(normalised)
    if real in allowed_paths:
        return normalised
    name = Path(normalised).name
    if not allow_all and name not in names:
        raise CommandRefused(_not_allowed(name, allowed, given=word))
    found = shutil.which(name, path=search_path)
    if allow_all and found is None and os.access(normalised, os.X_OK):
        return normalised
    if found is None or _real(found) != real:
        raise CommandRefused(
            f"{word!r} is not the allowed '{name}' ({found or 'not on PATH'}); "
            f"call it by its name: {name}"
        )
    return found


def _not_allowed(name: str, allowed: Sequence[str], given: str | None = None) -> str:
    shown = f"{given!r} ({name})" if given and given != name else repr(name)
    return f"command {shown} is not allowed. Allowed commands: {', '.join(sorted(allowed))}"
