"""``navi chat``: a client of the running ``navi serve``.

With a message (or one piped in: ``echo hi | navi chat``) it runs one turn and exits;
without one, on a terminal, it opens an interactive session (navi.cli.interactive).

Ctrl+C during a turn stops it the way the web client's Stop button does — a ``stop``
on the session's WebSocket, recorded in the log as ``run.stopped`` — and waits briefly
for the server to confirm (``stream_stopped``), so a later ``navi serve`` has nothing
to resume. A second Ctrl+C leaves at once.
"""

from __future__ import annotations

import argparse
import os
import sys

import anyio
from rich.console import Console

from navi.cli.chat_view import COMPLETED, STOPPED, ChatView
from navi.cli.remote import CliError, NaviClient, server_url
from navi.cli.turn import INTERRUPTED, run_turn


def add_arguments(chat: argparse.ArgumentParser) -> None:
    chat.add_argument(
        "message", nargs="?", help="what to say (none: read a pipe, or talk interactively)"
    )
    chat.add_argument("--session", help="continue this session: its id or a unique prefix")
    chat.add_argument("--profile", help="profile for a new session")
    chat.add_argument("--url", help="Navi's address (default: NAVI_URL, else NAVI_HOST:NAVI_PORT)")


def console() -> Console:
    """The chat's console: colours off when ``NO_COLOR`` is set (to anything) or stdout
    is not a terminal."""
    return Console(no_color=bool(os.environ.get("NO_COLOR")), highlight=False)


def cmd_chat(args: argparse.Namespace) -> int:
    from navi.cli.common import quiet_settings

    settings, env = quiet_settings(args)
    client = NaviClient(
        server_url(settings, env, args.url),
        env.get("NAVI_TOKEN", "").strip() or settings.api_token,
    )
    message = args.message
    interactive = message is None and sys.stdin.isatty()
    if message is None and not interactive:
        message = sys.stdin.read().strip()
        if not message:
            raise CliError("nothing to say: the message read from standard input is empty")

    async def run() -> int:
        try:
            if interactive:
                from navi.cli.interactive import history_path, interactive_chat

                # A new session is made at the first message: leaving at once leaves
                # no empty session behind. Asked now: whether Navi answers at all.
                await client.check_profile(args.profile)
                session = await client.resolve_session(args.session) if args.session else None
                history = history_path(settings.data_dir)
                return await interactive_chat(client, session, args.profile, console(), history)
            session = await _session(client, args)
            outcome = await run_turn(client, session, message, ChatView(console()))
            sys.stderr.write(f"session: {session}\n")
            return {COMPLETED: 0, STOPPED: 130, INTERRUPTED: 130}.get(outcome, 1)
        finally:
            await client.aclose()

    result: int = anyio.run(run)
    return result


async def _session(client: NaviClient, args: argparse.Namespace) -> str:
    if args.session:
        return await client.resolve_session(args.session)
    return await client.create_session(args.profile, one_shot=True)


def one_line(error: BaseException) -> str:
    """The message of an error, or of the first one inside an exception group."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return str(error) or type(error).__name__
