"""What the ``navi`` subcommands share: settings from the environment and the
arguments, how a refusal is written, a session named by a prefix of its id, and a
count with its noun."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from events.store import EventStore
from navi.config import Settings, SettingsError
from navi.data_dir import database_url
from navi.environment import environment


class CliError(Exception):
    """A failure the terminal shows as one line (no traceback)."""


PRIVATE_URLS_WARNING = (
    "NAVI_ALLOW_PRIVATE_URLS=1: http_request, web_view and image_view may reach this "
    "machine's services and private networks in every profile (never link-local, "
    "cloud-metadata addresses or Navi's own port)"
)


def settings_for(args: argparse.Namespace) -> tuple[Settings, dict[str, str]]:
    """The settings of the environment, with ``--db`` (a URL or a SQLite file's path),
    ``--host`` and ``--port``."""
    env = environment()
    if getattr(args, "db", None):
        try:  # a URL, or a plain file path for SQLite
            env["NAVI_DATABASE_URL"] = database_url(args.db)
        except ValueError as exc:
            raise SettingsError(f"--db: {exc}") from None
    if getattr(args, "host", None):
        env["NAVI_HOST"] = args.host
    if getattr(args, "port", None):
        env["NAVI_PORT"] = str(args.port)
    return Settings.from_env(env), env


def quiet_settings(args: argparse.Namespace) -> tuple[Settings, dict[str, str]]:
    """The settings, for a command that prints its own output: only warnings are logged."""
    from navi.logs import configure_logging

    settings, env = settings_for(args)
    configure_logging("WARNING")
    return settings, env


def fail(message: str, code: int = 1) -> int:
    """Say why on standard error; the command's exit code."""
    sys.stderr.write(f"navi: {message}\n")
    return code


def pick_session(given: str, ids: Iterable[str]) -> str:
    """The session id in ``ids`` that is ``given`` or the only one that starts with it;
    else a :class:`CliError` that says none does, or lists those that do."""
    ids = list(ids)
    if given in ids:
        return given
    matches = sorted(i for i in ids if i.startswith(given))
    if not matches:
        raise CliError(f"no session starts with {given!r} (see `navi sessions`)")
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (", …" if len(matches) > 5 else "")
        many = plural(len(matches), "session")
        raise CliError(f"{given!r} is ambiguous: {many} start with it: {shown}")
    return matches[0]


async def session_named(store: EventStore, given: str) -> str:
    """The session of the store that ``given`` names: its id, or a prefix of it only one
    session has (a subagent's stream counts; a user's memory or settings stream, whose id
    has a ``:``, does not)."""
    return pick_session(given, [s for s in await store.stream_heads() if ":" not in s])


def plural(count: int, noun: str, nouns: str = "") -> str:
    """``1 session``, ``2 sessions`` (``nouns``: an irregular plural)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"
