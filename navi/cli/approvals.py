"""Tool calls waiting for a person, from the terminal: how a request is shown, the
question ``navi chat`` asks (``y`` once, ``a`` for the session, ``n`` with an optional
reason), and ``navi approvals SESSION`` (list, ``--approve``, ``--deny``).

Both are clients of the running ``navi serve``, like the chat: a decision must reach
the actor that owns the session (it is waiting in that process; on PostgreSQL the
server forwards it to the node that owns the session). Written into the database by a
second process, it would break the one-writer rule of the log and the waiting run
would not hear of it. The server records who decided: the user of the token
(``local`` without accounts).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
import msgspec

from navi.cli.remote import CliError, NaviClient, server_url


class Decision(msgspec.Struct, frozen=True):
    approve: bool
    scope: str = "once"  # once | session
    reason: str = ""


def describe(frame: dict[str, Any], session: str | None = None) -> list[str]:
    """A request as lines: what the call does and where, its risk, who asked, what
    "for this session" would approve, then each argument whole (code included: the
    terminal scrolls, a folded argument could hide what runs)."""
    who = f" (asked by subagent {frame['subagent_id']})" if frame.get("subagent_id") else ""
    lines = [f"⏸ {frame.get('tool')} waits for approval{who}"]
    if frame.get("summary"):
        lines.append(f"  {frame['summary']}")
    for label, key in (("target", "target"), ("risk", "risk"), ("asked by", "asked_by")):
        if frame.get(key):
            lines.append(f"  {label}: {frame[key]}")
    scope = frame.get("session_scope")
    lines.append(
        f"  for this session: {scope['label']}"
        if isinstance(scope, dict)
        else "  this call can only be approved once"
    )
    lines.append(
        f"  call {frame.get('call_id')}"
        + (f" · stream {frame['stream_id']}" if frame.get("stream_id") else "")
        + (f" · session {session}" if session else "")
    )
    args = frame.get("args") or {}
    if not args:
        return [*lines, "  (no arguments)"]
    for key, value in args.items():
        lines += _argument(str(key), value)
    return lines


def _argument(key: str, value: Any) -> list[str]:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    rows = text.splitlines() or [""]
    pad = " " * (len(key) + 4)
    return [f"  {key}: {rows[0]}", *(pad + r for r in rows[1:])]


def decided_line(frame: dict[str, Any]) -> str:
    """An ``approval_decided`` frame as one line."""
    by = f" by {frame['by']}" if frame.get("by") else ""
    if frame.get("approved"):
        scope = ""
        if frame.get("scope") == "session":
            scope = (
                f" ({frame['scope_label']})" if frame.get("scope_label") else " for this session"
            )
        return f"  ✓ {frame.get('call_id')} approved{scope}{by}"
    reason = f": {frame['reason']}" if frame.get("reason") else ""
    return f"  ✗ {frame.get('call_id')} denied{by}{reason}"


def how_to_decide(session: str, call_id: str, stream_id: str = "") -> str:
    stream = f" --stream {stream_id}" if stream_id and stream_id != session else ""
    return (
        f"decide with `navi approvals {session} --approve {call_id}{stream}` "
        f"(--session-scope: what its card says, for the rest of the session) or "
        f"`--deny {call_id}{stream} [--reason TEXT]`, or in the web UI"
    )


async def ask(frame: dict[str, Any]) -> Decision:
    """Ask at the terminal until the answer is one of y / a / n (and, for n, an
    optional reason). Ctrl+C or Ctrl+D raise ``KeyboardInterrupt``: the caller stops
    the run, as Ctrl+C does anywhere in a turn."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.output.defaults import create_output

    # handle_sigint=False below: the turn listens for SIGINT itself, and a prompt that
    # took the handler over would leave none behind for the rest of the turn.
    prompt: PromptSession[str] = PromptSession(output=create_output(always_prefer_tty=True))
    tool = frame.get("tool")
    scope = frame.get("session_scope")
    offer = f" · [a] {scope['label']}" if isinstance(scope, dict) else ""
    question = f"run {tool}? [y] once{offer} · [n] deny: "
    try:
        while True:
            answer = (await prompt.prompt_async(question, handle_sigint=False)).strip().lower()
            if answer in ("y", "yes"):
                return Decision(True)
            if offer and answer in ("a", "all", "always"):
                return Decision(True, scope="session")
            if answer in ("n", "no"):
                reason = await prompt.prompt_async(
                    "reason (optional, Enter to skip): ", handle_sigint=False
                )
                return Decision(False, reason=reason.strip())
    except EOFError:
        raise KeyboardInterrupt from None


# ---------------------------------------------------------------- navi approvals


def add_commands(sub: Any) -> None:
    approvals = sub.add_parser(
        "approvals", help="list the tool calls of a session that wait for approval, decide one"
    )
    approvals.add_argument("session", help="session id or a unique prefix")
    which = approvals.add_mutually_exclusive_group()
    which.add_argument("--approve", metavar="CALL_ID", help="approve this call (or a prefix)")
    which.add_argument("--deny", metavar="CALL_ID", help="deny this call (or a prefix)")
    approvals.add_argument(
        "--stream",
        metavar="STREAM_ID",
        default="",
        help="the stream where the call waits (a subagent's; the list shows it)",
    )
    approvals.add_argument(
        "--session-scope",
        action="store_true",
        help="with --approve: approve what the call's card names for the rest of the session",
    )
    approvals.add_argument("--reason", default="", help="with --deny: why (the LLM reads it)")
    approvals.add_argument("--json", action="store_true", help="the list as JSON")
    approvals.add_argument(
        "--url", help="Navi's address (default: NAVI_URL, else NAVI_HOST:NAVI_PORT)"
    )
    approvals.set_defaults(func=cmd_approvals, parser=approvals)


def cmd_approvals(args: argparse.Namespace) -> int:
    from navi.cli.common import quiet_settings

    if args.session_scope and not args.approve:
        args.parser.error("--session-scope goes with --approve")
    if args.reason and not args.deny:
        args.parser.error("--reason goes with --deny")
    if args.stream and not (args.approve or args.deny):
        args.parser.error("--stream goes with --approve or --deny")
    settings, env = quiet_settings(args)
    client = NaviClient(
        server_url(settings, env, args.url),
        env.get("NAVI_TOKEN", "").strip() or settings.api_token,
    )

    async def run() -> int:
        try:
            session = await client.resolve_session(args.session)
            pending = await client.approvals(session)
            if args.approve or args.deny:
                return await _decide(client, session, pending, args)
            _list(session, pending, as_json=args.json)
            return 0
        finally:
            await client.aclose()

    result: int = anyio.run(run)
    return result


def _list(session: str, pending: list[dict[str, Any]], *, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(pending, ensure_ascii=False) + "\n")
        return
    if not pending:
        sys.stdout.write(f"No call waits for approval in session {session}.\n")
        return
    count = len(pending)
    sys.stdout.write(
        f"{count} call{'s' if count > 1 else ''} wait{'' if count > 1 else 's'} "
        f"for approval in session {session}:\n"
    )
    for frame in pending:
        sys.stdout.write("\n" + "\n".join(describe(frame)) + "\n")
    first = pending[0]
    sys.stdout.write(
        f"\n{how_to_decide(session, first['call_id'], str(first.get('stream_id', '')))}\n"
    )


async def _decide(
    client: NaviClient, session: str, pending: list[dict[str, Any]], args: argparse.Namespace
) -> int:
    approve = bool(args.approve)
    frame = _waiting_call(args.approve or args.deny, args.stream, pending)
    call_id = str(frame["call_id"])
    decided = await client.decide(
        session,
        call_id,
        stream_id=str(frame.get("stream_id") or ""),
        approve=approve,
        scope="session" if args.session_scope else "once",
        reason=args.reason,
    )
    tool = frame.get("tool") or "the call"
    sys.stdout.write(
        decided_line({**decided, "call_id": f"{call_id} ({tool})", "reason": args.reason}) + "\n"
    )
    return 0


def _waiting_call(given: str, stream: str, pending: list[dict[str, Any]]) -> dict[str, Any]:
    """The waiting call ``given`` names (its id or a prefix of it; in ``stream`` when
    given): exactly one, else an error that lists them. A call not in the list goes to
    the server as given: it says whether it is unknown or already decided."""
    here = [f for f in pending if not stream or f.get("stream_id") == stream]
    matches = [f for f in here if f.get("call_id") == given] or [
        f for f in here if str(f.get("call_id", "")).startswith(given)
    ]
    if len(matches) > 1:
        listed = ", ".join(f"{f.get('call_id')} (stream {f.get('stream_id')})" for f in matches)
        raise CliError(f"{given!r} names more than one waiting call: {listed}; add --stream")
    return matches[0] if matches else {"call_id": given, "stream_id": stream}
