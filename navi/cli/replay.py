"""``navi replay | inspect | events | export | import | verify | recompress``: replay and
debugging from the terminal, on the database directly (docs/replay.md); ``recompress``
opens Navi in-process (it calls the LLM).

A session is named by its id or by a prefix of it that only one session has (as ``navi
chat`` and ``navi approvals`` take it). Exit codes: 0 done, 1 the command found a problem
(a refused import, a failed verify, an unknown or ambiguous session), 2 a bad argument.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec

from events.store import EventStore
from navi.cli.common import CliError, fail, plural, quiet_settings, session_named


def add_commands(sub: Any) -> None:
    replay = sub.add_parser("replay", help="play a recorded run again in the terminal")
    replay.add_argument("session", help="session id")
    replay.add_argument("--run", type=int, help="which run: 1 is the first (default: the last)")
    replay.add_argument("--speed", default="1", help="a factor (2: twice as fast) or 'max'")
    replay.set_defaults(func=cmd_replay)

    inspect = sub.add_parser("inspect", help="the session as it was right after an event")
    inspect.add_argument("session", help="session id")
    inspect.add_argument("--at", type=int, help="the event's seq (default: the last)")
    inspect.add_argument(
        "--request", type=int, metavar="SEQ", help="the exact request of the LLM call at SEQ"
    )
    inspect.add_argument(
        "--approvals",
        action="store_true",
        help="the tool calls that waited for approval: decision, who, how long",
    )
    inspect.add_argument("--json", action="store_true", help="everything, as JSON")
    inspect.set_defaults(func=cmd_inspect)

    events = sub.add_parser("events", help="the raw event log of a session")
    events.add_argument("session", help="session id")
    events.add_argument("--after", type=int, default=0, help="only events after this seq")
    events.add_argument(
        "--type",
        action="append",
        default=[],
        help="a type (tool.completed) or a family (tool); repeat or comma-separate",
    )
    events.add_argument("--json", action="store_true", help="one JSON line per event")
    events.set_defaults(func=cmd_events)

    export = sub.add_parser("export", help="write a session's whole log as JSON lines")
    export.add_argument("session", help="session id")
    export.add_argument("-o", "--output", help="file to write (default: standard output)")
    export.set_defaults(func=cmd_export)

    imp = sub.add_parser("import", help="import an export file (checked whole first)")
    imp.add_argument("file", help="the .jsonl file of `navi export`")
    imp.add_argument("--as-new", action="store_true", help="import it under a new session id")
    imp.add_argument(
        "--user",
        help="the user who owns the imported session (default: the one the file names)",
    )
    imp.set_defaults(func=cmd_import)

    verify = sub.add_parser("verify", help="fold logs from scratch and compare with snapshots")
    verify.add_argument("session", nargs="?", help="session id (default: every session)")
    verify.set_defaults(func=cmd_verify)

    recompress = sub.add_parser("recompress", help="summarise a session's context again")
    recompress.add_argument("session", help="session id")
    recompress.add_argument("--model", help="the model to summarise with (default: the profile's)")
    recompress.set_defaults(func=cmd_recompress)

    for parser in (replay, inspect, events, export, imp, verify, recompress):
        parser.add_argument("--db", help="database URL")


def _with_store(args: argparse.Namespace, work: Callable[[EventStore], Awaitable[int]]) -> int:
    """Open the database of the settings (or ``--db``), run ``work``; replay errors and
    bad values become a message and an exit code."""
    from events.factory import store_for_url
    from navi.replay.errors import ReplayError

    settings, _ = quiet_settings(args)

    async def run() -> int:
        async with store_for_url(settings.database_url) as store:
            if getattr(args, "session", None):
                args.session = await session_named(store, args.session)
            return await work(store)

    try:
        result: int = anyio.run(run)
    except ReplayError as exc:
        return fail(str(exc))
    except ValueError as exc:
        return fail(str(exc), 2)
    return result


# ---------------------------------------------------------------------- replay


async def run_range(store: EventStore, session_id: str, run: int | None) -> tuple[int, int, int]:
    """``(first seq, last seq, runs)`` of run number ``run`` (1-based; ``None``: the
    last), from its user message to its end (or to the head, if it never ended)."""
    from events.types import TERMINAL_RUN_EVENTS
    from navi.replay.events_query import iter_events

    runs: list[tuple[int, int | None]] = []  # (first seq, last seq)
    previous = None
    async for record in iter_events(store, session_id, types=["run", "user.message"]):
        if record.type == "run.started":
            asked = previous is not None and previous.type == "user.message"
            runs.append((previous.seq if asked and previous else record.seq, None))
        elif record.type in TERMINAL_RUN_EVENTS and runs and runs[-1][1] is None:
            runs[-1] = (runs[-1][0], record.seq)
        previous = record
    if not runs:
        raise ValueError(f"session {session_id!r} has no run to replay")
    number = len(runs) if run is None else run
    if not 1 <= number <= len(runs):
        raise ValueError(f"session {session_id!r} has runs 1..{len(runs)}, not {run}")
    first, last = runs[number - 1]
    if last is None:
        from navi.replay.history import session_head

        last = await session_head(store, session_id)
    return first, last, len(runs)


def cmd_replay(args: argparse.Namespace) -> int:
    from navi.cli.printing import DIM, RESET, RunPrinter
    from navi.replay.history import pages
    from navi.replay.pacing import paced_gap, parse_speed

    async def work(store: EventStore) -> int:
        speed = parse_speed(args.speed)
        first, last, runs = await run_range(store, args.session, args.run)
        number = runs if args.run is None else args.run
        printer = RunPrinter(sys.stdout, show_user=True)
        dim, reset = (DIM, RESET) if printer.color else ("", "")
        sys.stderr.write(
            f"{dim}replaying run {number} of {runs} (events {first}..{last}), "
            f"speed {args.speed}{reset}\n"
        )
        previous = None
        async for page in pages(store, args.session, after_seq=first - 1, to_seq=last):
            for record in page:
                if speed is not None:
                    await anyio.sleep(paced_gap(previous, record) / speed)
                printer.show(record.event)
                previous = record
        return 0

    return _with_store(args, work)


# ---------------------------------------------------------------------- inspect


def _cut(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _message_lines(messages: list[Any], indent: str = "  ") -> list[str]:
    lines = []
    for m in messages:
        what = m.content
        if m.tool_calls:
            what += " " + " ".join(
                f"⚙ {c.name}({_cut(str(c.arguments), 80)})" for c in m.tool_calls
            )
        name = f" {m.name}" if m.name else ""
        lines.append(f"{indent}{m.seq:>6} {m.role}{name}: {_cut(what)}")
    return lines


def format_state(state: Any) -> str:
    """``navi inspect``'s text: the run state, what the user saw, what the LLM saw, the
    tools' state, and the LLM requests (with their messages where known)."""
    out = [
        f"session {state.session_id}, right after seq {state.seq} of {state.head}"
        + (f" ({state.event_type})" if state.event_type else ""),
        f"run state: {state.run_state.value}"
        + (f"  (refused: {state.run_state_error})" if state.run_state_error else ""),
        f"profile: {state.active_profile.profile_id or '-'}",
        "",
        f"messages (what the user saw): {len(state.messages)}",
        *_message_lines(state.messages),
        "",
        f"context (what the LLM saw): {len(state.context)} messages, "
        f"{state.context_token_count} tokens",
        *_message_lines(state.context),
    ]
    if state.todo:
        out += ["", "todo:", *(f"  [{t.status}] {t.text}" for t in state.todo)]
    if state.scratchpad:
        out += ["", "scratchpad:", *(f"  {k}: {_cut(v)}" for k, v in state.scratchpad.items())]
    out += ["", f"LLM requests: {len(state.llm_requests)}"]
    for r in state.llm_requests:
        options = msgspec.json.encode(r.options).decode()
        out.append(
            f"  seq {r.seq}: {r.purpose} #{r.iteration} attempt {r.attempt}, model {r.model or '-'}, "
            f"tools [{', '.join(r.tools)}], options {options}"
        )
        if r.messages is not None:
            out += _message_lines(r.messages, indent="      ")
        else:
            out.append(f"      (its messages: navi inspect {state.session_id} --request {r.seq})")
    return "\n".join(out) + "\n"


def format_request(request: Any) -> str:
    options = msgspec.json.encode(request.options).decode()
    run = request.run
    lines = [
        f"LLM call at seq {request.seq} ({request.created_at}): {request.purpose} "
        f"#{request.iteration}, attempt {request.attempt}",
        f"model: {request.model or '-'}",
        f"tools: {', '.join(request.tools) or '-'}",
        f"options: {options}",
    ]
    if run is not None:
        lines.append(f"run: {msgspec.json.encode(run).decode()}")
    lines.append(f"messages ({len(request.messages or [])}, after the system prompt):")
    lines += _message_lines(request.messages or [])
    return "\n".join(lines) + "\n"


def cmd_inspect(args: argparse.Namespace) -> int:
    from navi.replay.approvals import approval_lines, approvals
    from navi.replay.history import session_head
    from navi.replay.inspect import llm_request, state_at

    async def work(store: EventStore) -> int:
        if args.approvals:
            await session_head(store, args.session)  # an unknown session says so
            found = await approvals(store, args.session, to_seq=args.at)
            if args.json:
                sys.stdout.write(msgspec.json.encode(found).decode() + "\n")
            else:
                sys.stdout.write(
                    f"approvals in session {args.session}: {len(found)}\n"
                    + "".join(f"{line}\n" for line in approval_lines(args.session, found))
                )
            return 0
        if args.request is not None:
            request = await llm_request(store, args.session, args.request)
            if args.json:
                sys.stdout.write(msgspec.json.encode(request).decode() + "\n")
            else:
                sys.stdout.write(format_request(request))
            return 0
        at = args.at if args.at is not None else await session_head(store, args.session)
        state = await state_at(store, args.session, at)
        if args.json:
            sys.stdout.write(msgspec.json.encode(state).decode() + "\n")
            return 0
        sys.stdout.write(format_state(state))
        found = await approvals(store, args.session, to_seq=at)
        if found:
            lines = approval_lines(args.session, found)
            sys.stdout.write(f"\napprovals: {len(found)}\n" + "".join(f"{x}\n" for x in lines))
        return 0

    return _with_store(args, work)


# ---------------------------------------------------------------------- the raw log


def cmd_events(args: argparse.Namespace) -> int:
    from navi.replay.events_query import json_lines, text_lines

    types = [t for raw in args.type for t in raw.split(",") if t.strip()]

    async def work(store: EventStore) -> int:
        if args.json:
            async for line in json_lines(store, args.session, after=args.after, types=types):
                sys.stdout.buffer.write(line)
        else:
            async for text in text_lines(store, args.session, after=args.after, types=types):
                sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return 0

    return _with_store(args, work)


def cmd_export(args: argparse.Namespace) -> int:
    from navi.replay.export import export_lines

    async def work(store: EventStore) -> int:
        lines = [line async for line in export_lines(store, args.session)]
        if args.output:
            await anyio.Path(args.output).write_bytes(b"".join(lines))
        else:
            sys.stdout.buffer.writelines(lines)
            sys.stdout.flush()
        return 0

    return _with_store(args, work)


def cmd_import(args: argparse.Namespace) -> int:
    from navi.ids import new_id as new_session_id
    from navi.replay.import_ import import_session

    path = Path(args.file)
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        return fail(f"cannot read {path}: {exc}", 2)

    async def work(store: EventStore) -> int:
        session_id = new_session_id() if args.as_new else None
        result = await import_session(store, lines, owner=args.user, new_session_id=session_id)
        streams = len(result.streams)
        sys.stdout.write(
            f"imported session {result.session_id}: {plural(result.events, 'event')} in "
            f"{plural(streams, 'stream')}, owned by {result.owner!r}\n"
        )
        for warning in result.warnings:
            sys.stderr.write(f"warning: {warning}\n")
        return 0

    return _with_store(args, work)


def cmd_verify(args: argparse.Namespace) -> int:
    from navi.replay.verify import verify_all, verify_session

    async def work(store: EventStore) -> int:
        if args.session:
            reports = [await verify_session(store, args.session)]
        else:
            reports = await verify_all(store)
        for report in reports:
            mark = "✓" if report.ok else "✗"
            sys.stdout.write(
                f"{mark} {report.session_id}: {plural(report.head, 'event')}, "
                f"{plural(report.snapshots_checked, 'snapshot')} checked"
                + (f", {report.stale_snapshots} stale" if report.stale_snapshots else "")
                + "\n"
            )
            if report.error:
                sys.stdout.write(f"    error at seq {report.error_seq}: {report.error}\n")
            for d in report.differences:
                sys.stdout.write(
                    f"    {d.projection} differs from seq {d.first_differing_seq} "
                    f"({d.source} at seq {d.at_seq}): {d.detail}\n"
                )
        bad = sum(not r.ok for r in reports)
        sys.stdout.write(
            f"{plural(len(reports), 'session')} verified"
            + (f", {bad} with differences\n" if bad else ", all good\n")
        )
        return 1 if bad else 0

    return _with_store(args, work)


def cmd_recompress(args: argparse.Namespace) -> int:
    from events.types import ContextCompressed
    from navi.app import Navi
    from navi.recompress import recompress_and_wait
    from navi.session.errors import SessionError

    settings, env = quiet_settings(args)

    async def run() -> int:
        async with Navi.open(settings, env=env, background=False) as navi:
            try:
                args.session = await session_named(navi.store, args.session)
                record = await recompress_and_wait(navi, args.session, args.model)
            except (SessionError, CliError) as exc:  # CliError: no such session
                return fail(str(exc))
        event = record.event
        if not isinstance(event, ContextCompressed):
            return fail(f"the recompression failed: {getattr(event, 'error', event)}")
        sys.stdout.write(
            f"summarised events {event.from_seq}..{event.to_seq} with {event.model or 'the profile model'}"
            f" ({event.messages_before} → {event.messages_after} messages in the context):\n"
            f"{event.summary}\n"
        )
        return 0

    result: int = anyio.run(run)
    return result
