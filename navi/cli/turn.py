"""One turn of ``navi chat`` over the WebSocket: send the message, show the frames until
the run ends, and on Ctrl+C send the same stop as the Stop button (shared by the one-turn
and the interactive chat).

A tool call that waits for approval is asked about at the terminal when standard input
is one (navi.cli.approvals.ask); otherwise the chat says on stderr that the call waits
and how to decide (``navi approvals``, the web UI), and keeps following the turn: the
decision, taken elsewhere, reaches it like any other frame. Ctrl+C while asked stops the
run, as it does anywhere in a turn.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

import anyio

from navi.cli.chat_view import ChatView
from navi.cli.remote import CliError, NaviClient, receive_frame, send_frame

# How long a stop may take to be confirmed before the chat gives up waiting.
STOP_WAIT_S = 5.0
INTERRUPTED = "interrupted"  # a second Ctrl+C: left without waiting


class _Interrupts:
    """Ctrl+C, from SIGINT or from a question at the prompt (which reads the key itself):
    the first asks for a stop, the second to leave at once."""

    def __init__(self) -> None:
        self.stop = anyio.Event()
        self.leave = anyio.Event()

    def press(self) -> None:
        if self.stop.is_set():
            self.leave.set()
        self.stop.set()


async def run_turn(
    client: NaviClient,
    session: str,
    message: str,
    view: ChatView,
    *,
    can_ask: bool | None = None,
) -> str:
    """Send ``message`` and show the turn until it ends; its outcome. Ctrl+C: stop.
    ``can_ask``: whether approvals are asked at the terminal (default: stdin is one)."""
    outcome = INTERRUPTED
    interrupts = _Interrupts()
    asking = sys.stdin.isatty() if can_ask is None else can_ask
    async with client.socket(session) as ws, anyio.create_task_group() as tg:

        async def on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                async for _ in signals:
                    interrupts.press()

        async def on_interrupt() -> None:
            nonlocal outcome
            await interrupts.stop.wait()
            view.note("stopping… (Ctrl+C again to leave now)")
            try:
                await send_frame(ws, {"type": "stop"})
            except CliError:  # the socket is gone: ask over REST instead
                with anyio.move_on_after(STOP_WAIT_S):
                    await client.stop(session)
            deadline = anyio.current_time() + STOP_WAIT_S
            with anyio.move_on_after(STOP_WAIT_S):
                await interrupts.leave.wait()
            if anyio.current_time() >= deadline:
                view.note("the stop was not confirmed in time", style="yellow")
            outcome = INTERRUPTED
            tg.cancel_scope.cancel()

        async def follow() -> None:
            nonlocal outcome
            asked: set[str] = set()  # a request is sent again on reconnect: ask once
            view.begin()
            try:
                await send_frame(ws, {"type": "message", "content": message})
                while True:
                    frame = await receive_frame(ws)
                    ended = view.show(frame)
                    if ended is not None:
                        outcome = ended
                        break
                    # One call: its stream and its id (subagents' may look alike).
                    call_key = f"{frame.get('stream_id')}/{frame.get('call_id')}"
                    if frame.get("type") == "approval_required" and call_key not in asked:
                        asked.add(call_key)
                        if not interrupts.stop.is_set():
                            await _approval(client, session, frame, view, asking, interrupts)
            finally:
                view.end()
            tg.cancel_scope.cancel()

        tg.start_soon(on_signal)
        tg.start_soon(on_interrupt)
        tg.start_soon(follow)
    return outcome


async def _approval(
    client: NaviClient,
    session: str,
    frame: dict[str, Any],
    view: ChatView,
    asking: bool,
    interrupts: _Interrupts,
) -> None:
    """Ask about one waiting call and record the answer; or, with no terminal to ask
    at, say on stderr how to decide (the turn goes on waiting for the decision)."""
    from navi.cli.approvals import ask, describe, how_to_decide

    call_id = str(frame.get("call_id"))
    stream_id = str(frame.get("stream_id") or "")
    if not view.rich:  # the view shows the request on a terminal only
        sys.stderr.write("\n".join(describe(frame, session)) + "\n")
    if not asking:
        sys.stderr.write(f"waiting for a decision: {how_to_decide(session, call_id, stream_id)}\n")
        sys.stderr.flush()
        return
    view.pause()
    try:
        decision = await ask(frame)
    except KeyboardInterrupt:
        interrupts.press()  # the prompt read Ctrl+C as a key: the same stop
        return
    finally:
        view.resume()
    try:
        await client.decide(
            session,
            call_id,
            stream_id=stream_id,
            approve=decision.approve,
            scope=decision.scope,
            reason=decision.reason,
        )
    except CliError as exc:  # decided meanwhile elsewhere (409), or the call ended
        view.note(f"not recorded: {exc}", style="yellow")
