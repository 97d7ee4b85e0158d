"""One turn of ``navi chat`` over the WebSocket: send the message, show the frames until
the run ends, and on Ctrl+C send the same stop as the Stop button (shared by the one-turn
and the interactive chat)."""

from __future__ import annotations

import signal

import anyio

from navi.cli.chat_view import ChatView
from navi.cli.remote import CliError, NaviClient, receive_frame, send_frame

# How long a stop may take to be confirmed before the chat gives up waiting.
STOP_WAIT_S = 5.0
INTERRUPTED = "interrupted"  # a second Ctrl+C: left without waiting


async def run_turn(client: NaviClient, session: str, message: str, view: ChatView) -> str:
    """Send ``message`` and show the turn until it ends; its outcome. Ctrl+C: stop."""
    outcome = INTERRUPTED
    async with client.socket(session) as ws, anyio.create_task_group() as tg:

        async def on_interrupt() -> None:
            nonlocal outcome
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                async for _ in signals:
                    break
                view.note("stopping… (Ctrl+C again to leave now)")
                try:
                    await send_frame(ws, {"type": "stop"})
                except CliError:  # the socket is gone: ask over REST instead
                    with anyio.move_on_after(STOP_WAIT_S):
                        await client.stop(session)
                deadline = anyio.current_time() + STOP_WAIT_S
                with anyio.move_on_after(STOP_WAIT_S):
                    async for _ in signals:
                        break  # a second Ctrl+C
                if anyio.current_time() >= deadline:
                    view.note("the stop was not confirmed in time", style="yellow")
                outcome = INTERRUPTED
                tg.cancel_scope.cancel()

        async def follow() -> None:
            nonlocal outcome
            view.begin()
            try:
                await send_frame(ws, {"type": "message", "content": message})
                while True:
                    ended = view.show(await receive_frame(ws))
                    if ended is not None:
                        outcome = ended
                        break
            finally:
                view.end()
            tg.cancel_scope.cancel()

        tg.start_soon(on_interrupt)
        tg.start_soon(follow)
    return outcome
