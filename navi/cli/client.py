"""``navi sessions``, ``navi reextract``, ``navi doctor``: commands that open Navi
in-process; and ``navi chat``'s arguments (the chat itself is a client of the running
server: navi.cli.chat)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio

from navi.cli import chat as chat_command
from navi.cli.common import PRIVATE_URLS_WARNING, plural, quiet_settings
from navi.cli.remote import CliError


def add_commands(sub: Any) -> None:
    chat = sub.add_parser(
        "chat", help="talk to the running Navi: one turn, or a conversation at a prompt"
    )
    chat_command.add_arguments(chat)
    chat.set_defaults(func=chat_command.cmd_chat)

    sessions = sub.add_parser("sessions", help="list sessions")
    sessions.add_argument("--db", help="database URL")
    sessions.set_defaults(func=cmd_sessions)

    memory = sub.add_parser(
        "reextract", help="rebuild long-term memory from every session's log (admin)"
    )
    memory.add_argument("--model", help="extract with this model instead of the default")
    memory.add_argument("--prompt-file", help="a file with another extraction prompt")
    memory.add_argument("--db", help="database URL")
    memory.set_defaults(func=cmd_reextract)

    doctor = sub.add_parser("doctor", help="check the database, the LLM, profiles and tools")
    doctor.add_argument("--db", help="database URL")
    doctor.set_defaults(func=cmd_doctor)


def cmd_sessions(args: argparse.Namespace) -> int:
    from events.factory import store_for_url
    from projections.runner import LogProjectionRunner
    from projections.sessions import SESSIONS

    settings, _ = quiet_settings(args)
    missing = _missing_sqlite_file(settings.database_url)
    if missing:  # opening it would create an empty database
        raise CliError(f"no database at {missing} (give --db, or start `navi serve` once)")

    async def run() -> None:
        try:
            async with store_for_url(settings.database_url) as store:
                state = await LogProjectionRunner(store, SESSIONS).catch_up()
        except (OSError, ValueError) as exc:
            raise CliError(f"cannot read the database {settings.database_url}: {exc}") from exc
        listing = state.listing()
        if not listing:
            sys.stdout.write(f"No sessions yet in {settings.database_url}.\n")
        for s in listing:
            pin = "📌 " if s.pinned else "   "
            lineage = f"  (fork of {s.forked_from} at {s.forked_at_seq})" if s.forked_from else ""
            count = f"{s.message_count:>4} {'message ' if s.message_count == 1 else 'messages'}"
            sys.stdout.write(
                f"{pin}{s.session_id}  {s.last_active[:19]}  {s.profile_id:<13} "
                f"{count}  {s.title}{lineage}\n"
            )

    anyio.run(run)
    return 0


def _missing_sqlite_file(url: str) -> str | None:
    """The path of a SQLite URL whose file does not exist."""
    from pathlib import Path

    scheme, _, rest = url.partition("://")
    if scheme not in {"sqlite", "sqlite+aiosqlite"} or not rest.startswith("/"):
        return None
    path = rest[1:]
    return None if path == ":memory:" or Path(path).exists() else path


def cmd_doctor(args: argparse.Namespace) -> int:
    from navi.llm.diagnose import diagnose_llm
    from navi.run.approval import approval_report
    from profiles import ProfileRegistry
    from tools import create_registry
    from tools.sandbox import sandbox_report

    settings, env = quiet_settings(args)
    problems = 0

    def line(ok: bool, text: str) -> None:
        nonlocal problems
        problems += 0 if ok else 1
        sys.stdout.write(f"{'✓' if ok else '✗'} {text}\n")

    async def run() -> None:
        await _doctor_data(settings, line)
        try:
            for finding in await diagnose_llm(await _saved_llm_settings(settings)):
                line(finding.ok, finding.text)
        except Exception as exc:
            line(False, f"LLM: {exc}")
        profiles = ProfileRegistry.from_environ(env)
        line(not profiles.errors, f"profiles: {', '.join(p.id for p in profiles.all())}")
        for problem in profiles.errors:
            line(False, f"  {problem}")
        level, sandbox = sandbox_report(
            settings.tools.unsandboxed_tools, settings.tools.sandbox_user
        )
        if level == "warning":
            sys.stdout.write(f"! warning: {sandbox}\n")
        else:
            line(level == "ok", sandbox)
        if settings.tools.allow_private_urls:
            sys.stdout.write(f"! warning: {PRIVATE_URLS_WARNING}\n")
        level, approvals = approval_report(settings.tool_approval)
        if level == "warning":
            sys.stdout.write(f"! warning: {approvals}\n")
        else:
            line(True, approvals)
        tools = create_registry(settings.tools)
        line(not tools.load_errors, f"tools: {len(tools.names())} loaded")
        for error in tools.load_errors:
            line(False, f"  {error}")
        for name, reason in tools.unavailable.items():
            line(False, f"  tool {name} is unavailable: {reason}")
        for p in profiles.all():
            missing = [t for t in p.enabled_tools if tools.get(t) is None]
            if missing:
                sys.stdout.write(
                    f"  note: profile {p.id} names tools not loaded yet: {', '.join(missing)}\n"
                )
        await tools.aclose()
        await _doctor_mcp(settings, tools, line)

    anyio.run(run)
    sys.stdout.write("All good.\n" if problems == 0 else f"{plural(problems, 'problem')} found.\n")
    return 0 if problems == 0 else 1


async def _doctor_data(settings: Any, line: Any) -> None:
    """The data folder and the database, creating neither: a SQLite file that is not
    there yet is reported as such, not made empty (doctor only looks)."""
    from events.factory import store_for_url
    from navi.llm.errors import redact_url

    made = "" if await anyio.Path(settings.data_dir).is_dir() else " (navi serve makes it)"
    sys.stdout.write(f"  data folder: {settings.data_dir}{made}\n")
    for note in settings.data_notes:
        sys.stdout.write(f"! note: {note}\n")
    shown = redact_url(settings.database_url)
    scheme, _, path = settings.database_url.partition(":///")
    sqlite_file = scheme.lower() in {"sqlite", "sqlite+aiosqlite"} and ":memory:" not in path
    if sqlite_file and path and not await anyio.Path(path).exists():
        line(True, f"database {shown}: none yet (navi serve creates it)")
        return
    try:
        async with store_for_url(settings.database_url) as store:
            heads = await store.stream_heads()
            line(True, f"database {shown}: {plural(len(heads), 'stream')}")
    except Exception as exc:
        line(False, f"database {shown}: {redact_url(str(exc))}")


async def _saved_llm_settings(settings: Any) -> Any:
    """The LLM settings as ``navi serve`` uses them: the connection saved on the settings
    page (type, URL, the key file's key) over the environment's. A database not there
    yet is not made (doctor only looks)."""
    from events.factory import store_for_url
    from navi.llm.connection import Connection, KeyFile, connection_settings
    from navi.user_settings import SERVER, SettingsService

    scheme, _, path = settings.database_url.partition(":///")
    sqlite_file = scheme.lower() in {"sqlite", "sqlite+aiosqlite"} and ":memory:" not in path
    if sqlite_file and path and not await anyio.Path(path).exists():
        return settings.llm
    try:
        async with store_for_url(settings.database_url) as store:
            saved = await SettingsService(store).get(SERVER)
    except Exception:  # the database line says what is wrong with it
        return settings.llm
    if not (saved.backend_type or saved.backend_url):
        return settings.llm
    key = KeyFile(settings.llm_key_path).read() if saved.api_key_hint else ""
    where = saved.backend_url or "the environment's URL"
    sys.stdout.write(
        f"  LLM connection saved in Settings: {saved.backend_type or 'as set'} at {where}\n"
    )
    connection = Connection(kind=saved.backend_type, url=saved.backend_url, api_key=key)
    return connection_settings(settings.llm, connection)


async def _doctor_mcp(settings: Any, tools: Any, line: Any) -> None:
    """Each MCP server of the config: started or not, why, how many tools."""
    from navi.mcp import load_config, probe
    from navi.mcp.oauth import oauth_places
    from navi.mcp.sandbox import sandbox_places

    path = settings.mcp_config_path
    config = load_config(path)
    if not config.servers and not config.errors:
        where = "" if path.exists() else " (no such file)"
        sys.stdout.write(f"  MCP servers: none configured in {path}{where}\n")
        return
    line(not config.errors, f"MCP config {path}: {plural(len(config.servers), 'server')}")
    for problem in config.errors:
        line(False, f"  {problem}")
    # A probe signs in with the kept tokens; one that needs a sign-in is given the link
    # to navi serve's sign-in route (the probe's own registration is never kept).
    oauth = oauth_places(settings, persist_registration=False)
    for status in await probe(config, tools, places=sandbox_places(settings), oauth=oauth):
        line(status.state == "running", status.describe())
        if status.state == "needs-sign-in":
            sys.stdout.write(f"  (the link works while navi serve runs at {oauth.base_url})\n")


def cmd_reextract(args: argparse.Namespace) -> int:
    from pathlib import Path

    from navi.app import Navi

    settings, env = quiet_settings(args)
    prompt = Path(args.prompt_file).read_text(encoding="utf-8") if args.prompt_file else None

    async def run() -> None:
        async with Navi.open(settings, env=env, background=False) as navi:
            report = await navi.memory_worker.reextract_all(model=args.model, prompt=prompt)
            sys.stdout.write(
                f"re-extracted {plural(len(report.sessions), 'session')}: "
                f"{plural(report.facts, 'fact')}, {plural(report.failed_calls, 'failed call')}, "
                f"{plural(report.broken_answers, 'broken answer')}\n"
            )

    anyio.run(run)
    return 0
