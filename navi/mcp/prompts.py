"""An MCP server's prompts as a client offers them: listed, and filled in with arguments.

A prompt is a template the server keeps ("summarize this chat", "review the file
``path``"); the web client's composer offers them behind ``/`` (docs/web-client.md)
and puts the text a prompt gives into the message box, for the user to send.

Everything a server says is bounded here before anyone sees it: at most
``PROMPTS_MAX`` prompts a server, names of at most ``NAME_MAX`` characters (longer
ones are left out: a client could not name them back), descriptions cut to
``DESCRIPTION_MAX``, at most ``ARGUMENTS_MAX`` arguments a prompt; a filled-in prompt
longer than ``TEXT_MAX`` characters is refused (:class:`PromptTooLong`). What a client
sends is checked before the server hears of it (:func:`check_arguments`): only the
prompt's declared arguments, strings of at most ``ARGUMENT_MAX`` characters, the
required ones present.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from navi.log_redaction import redact_text

PROMPTS_MAX = 200
NAME_MAX = 128
DESCRIPTION_MAX = 500
ARGUMENTS_MAX = 20
ARGUMENT_MAX = 4000
TEXT_MAX = 32_000


class PromptArgument(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str = ""
    required: bool = False


class PromptInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One prompt of one server, as the prompt menu shows it."""

    server: str
    name: str
    title: str = ""
    description: str = ""
    arguments: tuple[PromptArgument, ...] = ()


class BadArguments(ValueError):
    """What a client sent for a prompt's arguments cannot be sent on; says why."""


class PromptTooLong(ValueError):
    """The server's filled-in prompt is longer than ``TEXT_MAX`` characters."""


def _short(text: object, limit: int) -> str:
    if not isinstance(text, str):
        return ""
    line = " ".join(text[: limit * 4].split())
    line = redact_text(line)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def prompt_infos(server: str, listed: Iterable[Any]) -> tuple[PromptInfo, ...]:
    """The prompts a server listed (the SDK's ``Prompt`` objects), bounded (module doc)."""
    found: list[PromptInfo] = []
    for prompt in listed:
        name = getattr(prompt, "name", None)
        if not isinstance(name, str) or not name or len(name) > NAME_MAX:
            continue
        arguments = tuple(
            PromptArgument(
                name=a.name,
                description=_short(a.description, DESCRIPTION_MAX),
                required=bool(a.required),
            )
            for a in (getattr(prompt, "arguments", None) or ())[:ARGUMENTS_MAX]
            if isinstance(a.name, str) and 0 < len(a.name) <= NAME_MAX
        )
        found.append(
            PromptInfo(
                server=server,
                name=name,
                title=_short(getattr(prompt, "title", None), NAME_MAX),
                description=_short(getattr(prompt, "description", None), DESCRIPTION_MAX),
                arguments=arguments,
            )
        )
        if len(found) >= PROMPTS_MAX:
            break
    return tuple(found)


def check_arguments(info: PromptInfo, given: Mapping[str, object]) -> dict[str, str]:
    """``given`` as the arguments to send, or :class:`BadArguments` saying what is wrong."""
    declared = {a.name for a in info.arguments}
    unknown = sorted(name for name in given if name not in declared)
    if unknown:
        named = ", ".join(repr(n[:40]) for n in unknown[:5])
        takes = ", ".join(sorted(declared)) or "none"
        raise BadArguments(f"the prompt {info.name!r} has no argument {named} (it takes: {takes})")
    out: dict[str, str] = {}
    for name, value in given.items():
        if not isinstance(value, str):
            raise BadArguments(f"argument {name!r} must be a string")
        if len(value) > ARGUMENT_MAX:
            raise BadArguments(
                f"argument {name!r} is {len(value)} characters long; at most {ARGUMENT_MAX}"
            )
        out[name] = value
    missing = [a.name for a in info.arguments if a.required and not out.get(a.name, "").strip()]
    if missing:
        raise BadArguments(f"the prompt {info.name!r} needs {', '.join(map(repr, missing))}")
    return out


def checked_text(text: str) -> str:
    """The filled-in prompt's text, or :class:`PromptTooLong`."""
    if len(text) > TEXT_MAX:
        raise PromptTooLong(
            f"the MCP server's prompt is {len(text)} characters long; Navi takes at most {TEXT_MAX}"
        )
    return text
