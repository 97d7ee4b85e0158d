"""The WebSocket ``/ws/sessions/{id}``: the session's log as protocol frames, live.

Frames come only from durable events and carry their ``seq``. ``?after=<seq>``
replays what a client missed, then goes live (no gap, no duplicate, across server
restarts: the log is the source); ``&seen=<n>`` resumes inside event ``seq``. Events
of subagents are followed from their own streams and marked ``is_subagent``. Each
connection has a bounded send queue and a send timeout: a client that stops reading is
closed (4008) while the run goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream
from starlette.websockets import WebSocket, WebSocketDisconnect

from events.envelope import Recorded
from events.types import TERMINAL_RUN_EVENTS, SubagentFinished, SubagentSpawned
from navi.accounts import User
from navi.server import protocol as p
from navi.server.frames import Frame, FrameTranslator, coalesce, running_subagents
from navi.server.http import user_of
from navi.server.incoming import incoming
from navi.server.state import ServerState, state_of
from navi.session.errors import SessionError, SessionNotFound
from navi.session.input import MESSAGE_BODY_BYTES

log = structlog.get_logger(__name__)

SEND_QUEUE = 2048
SEND_TIMEOUT = 10.0
# Client messages read but not yet handled; one more gets an error frame instead.
REQUEST_QUEUE = 32
# Frames waiting for a client before runs of deltas are merged (see frames.coalesce):
# a few suffice to show the client lags.
COALESCE_BACKLOG = 8
# The largest message a client may send: one with its ten 5 MB images in base64, as a
# REST message's body may be. ``navi serve`` gives it to uvicorn (``ws_max_size``), so a
# larger frame is refused at the socket as soon as its header announces it, never read:
# the connection is closed with 1009 (message too big), and the client reconnects.
MAX_FRAME_BYTES = MESSAGE_BODY_BYTES
# uvicorn's keepalive (``navi serve``): a ping every 20 s, as uvicorn's default; the pong
# may take 60 s (uvicorn: 20) before the socket is deemed dead. The pong is read by the
# event loop, so under load (hundreds of streams, a long collection) it is late, never
# lost: a socket is closed because the client is gone, not because the server is busy.
PING_INTERVAL_S = 20.0
PING_TIMEOUT_S = 60.0
CLOSE_NOT_FOUND = 4004
CLOSE_TOO_SLOW = 4008


def _int_param(websocket: WebSocket, name: str) -> int | None:
    raw = websocket.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return max(0, int(raw))
    except ValueError:
        return None


def _sub_after(websocket: WebSocket) -> dict[str, int]:
    """``?sub_after=child:seq,child:seq``: where the client is in running subagents."""
    out: dict[str, int] = {}
    for part in websocket.query_params.get("sub_after", "").split(","):
        child, _, seq = part.rpartition(":")
        if child and seq.isdigit():
            out[child] = int(seq)
    return out


async def accept_session(websocket: WebSocket, *, as_listed: bool = False) -> str | None:
    """Accept; the session's id, or None when this user has no such session (closed 4004).
    ``as_listed``: the owner as the sessions list has it (``SessionsView.owned``); the
    caller then refuses a deleted session from its log."""
    session_id: str = websocket.path_params["session_id"]
    await websocket.accept()
    sessions, user = state_of(websocket).sessions, user_of(websocket)  # type: ignore[arg-type]
    try:
        if as_listed:
            await sessions.owned(session_id, user)
        else:
            await sessions.get(session_id, user)
    except SessionNotFound:
        await close_not_found(websocket)
        return None
    return session_id


async def close_not_found(websocket: WebSocket) -> None:
    await websocket.close(code=CLOSE_NOT_FOUND, reason="session not found")


async def session_socket(websocket: WebSocket) -> None:
    session_id = await accept_session(websocket, as_listed=True)
    if session_id is None:
        return
    records = await state_of(websocket).navi.store.read(session_id)
    if any(record.type == "session.deleted" for record in records):
        await close_not_found(websocket)
        return
    user = user_of(websocket)  # type: ignore[arg-type]
    connection = Connection(state_of(websocket), websocket, session_id, user)
    await connection.serve(records)


class Connection:
    def __init__(
        self, server: ServerState, websocket: WebSocket, session_id: str, user: User
    ) -> None:
        self.server = server
        self.user = user
        self.websocket = websocket
        self.session_id = session_id
        self.log = log.bind(session_id=session_id)
        send, receive = anyio.create_memory_object_stream[Frame](SEND_QUEUE)
        self._send = send
        self._receive = receive
        self._slow = False
        self._scope = anyio.CancelScope()

    async def push(self, frames: list[Frame]) -> None:
        """Queue frames. A queue that stays full for ``SEND_TIMEOUT`` means the client
        stopped reading: it is dropped. Waiting here slows only this connection's
        reading of the log, never the run or the other clients."""
        if self._slow:
            return
        for frame in frames:
            try:
                self._send.send_nowait(frame)
            except anyio.WouldBlock:
                with anyio.move_on_after(SEND_TIMEOUT) as timer:
                    await self._send.send(frame)
                if timer.cancelled_caught:
                    self._slow = True
                    self._scope.cancel()
                    return

    async def serve(self, records: list[Recorded]) -> None:
        """Follow the session from its stream ``records`` (a fork's holds a copy of its
        origin's part): its seqs are the ones the client sees, ``?after=`` included."""
        after = _int_param(self.websocket, "after")
        if after is None:
            after = records[-1].seq if records else 0
        translator = FrameTranslator(max_context_tokens=self.server.max_context_tokens)
        earlier = [r for r in records if r.seq <= after]
        # One event can give several frames, all with its seq (the thinking_end and the
        # first text after the thinking, say), and a connection can be cut between them:
        # ``?seen=`` counts those of event ``after`` the client has; it gets the rest first.
        seen = _int_param(self.websocket, "seen")
        rest: list[Frame] = []
        if seen is not None and earlier and earlier[-1].seq == after:
            translator.prime(earlier[:-1])
            rest = translator.frames(earlier[-1])[seen:]
        else:
            translator.prime(earlier)
        waiting = translator.awaiting_frames()  # sent again: the client may have lost them
        running = running_subagents(earlier)
        sub_after = _sub_after(self.websocket)
        with self._send, self._scope:
            await self.push(rest)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._sender)
                await self.push(waiting)
                tg.start_soon(self._follow, translator, after, running, sub_after, tg)
                tg.start_soon(self._follow_queue)
                await self._receive_loop()
                tg.cancel_scope.cancel()
        if self._slow:
            self.log.warning("ws.slow_client_dropped")
            self.server.slow_clients_dropped += 1
            with anyio.move_on_after(1):
                await self.websocket.close(code=CLOSE_TOO_SLOW, reason="client too slow")

    async def _sender(self) -> None:
        async with self._receive:
            async for frame in self._receive:
                batch = [frame]
                if self._receive.statistics().current_buffer_used >= COALESCE_BACKLOG:
                    # The client lags: send what waits with runs of deltas merged.
                    while len(batch) < SEND_QUEUE:
                        try:
                            batch.append(self._receive.receive_nowait())
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                    batch = coalesce(batch)
                # A batch not sent within SEND_TIMEOUT drops the client.
                with anyio.move_on_after(SEND_TIMEOUT) as timer:
                    try:
                        for out in batch:
                            await self.websocket.send_text(p.encode(out))
                    except (WebSocketDisconnect, RuntimeError, OSError):
                        self._scope.cancel()
                        return
                if timer.cancelled_caught:
                    self._slow = True
                    self._scope.cancel()
                    return

    async def _follow(
        self,
        translator: FrameTranslator,
        after: int,
        running: list[str],
        sub_after: dict[str, int],
        tg: anyio.abc.TaskGroup,
    ) -> None:
        children: dict[str, anyio.Event] = {}
        for child in running:
            children[child] = anyio.Event()
            tg.start_soon(self._follow_child, child, sub_after.get(child, 0), children[child])
        async for record in self.server.navi.store.subscribe(self.session_id, after_seq=after):
            event = record.event
            if isinstance(event, SubagentSpawned):
                done = children[event.child_stream_id] = anyio.Event()
                tg.start_soon(self._follow_child, event.child_stream_id, 0, done)
            elif isinstance(event, SubagentFinished):
                # The child's frames all go out before the parent's tool_call.
                done_event = children.pop(event.child_stream_id, None)
                if done_event is not None:
                    with anyio.move_on_after(5):
                        await done_event.wait()
            await self.push(translator.frames(record))

    async def _follow_queue(self) -> None:
        """While the session's run waits for a slot of the node (NAVI_MAX_LIVE_RUNS):
        ``run_queued`` with how many wait before it, again each time that changes, and
        ``run_dequeued`` when it leaves the line (it starts, or was stopped). Not from the
        log: a client that connects meanwhile gets the position now."""
        queued = False
        async for ahead in self.server.navi.live_runs.watch(self.session_id):
            if ahead is not None:
                queued = True
                await self.push([p.RunQueued(ahead=ahead)])
            elif queued:
                queued = False
                await self.push([p.RunDequeued()])

    async def _follow_child(self, child: str, after: int, done: anyio.Event) -> None:
        translator = FrameTranslator(
            max_context_tokens=self.server.max_context_tokens, is_subagent=True
        )
        store = self.server.navi.store
        translator.prime(await store.read(child, to_seq=after))
        await self.push(translator.awaiting_frames())
        running: dict[str, anyio.Event] = {}
        try:
            async with anyio.create_task_group() as tg:
                async for record in store.subscribe(child, after_seq=after):
                    event = record.event
                    if isinstance(event, SubagentSpawned):  # nested subagents
                        running[event.child_stream_id] = anyio.Event()
                        tg.start_soon(
                            self._follow_child,
                            event.child_stream_id,
                            0,
                            running[event.child_stream_id],
                        )
                    elif isinstance(event, SubagentFinished) and event.child_stream_id in running:
                        with anyio.move_on_after(5):
                            await running.pop(event.child_stream_id).wait()
                    await self.push(translator.frames(record))
                    if record.type in TERMINAL_RUN_EVENTS:
                        break
                tg.cancel_scope.cancel()
        finally:
            done.set()

    async def _receive_loop(self) -> None:
        """Read the socket without waiting for a message to be handled: uvicorn reads no
        more of a socket until the app asks for its next message, so a slow handler left
        the client's pongs unread and the keep-alive closed busy clients (1011). What a
        client sent before it left is still handled, in order, as it was before."""
        send, receive = anyio.create_memory_object_stream[p.LiveMessage](REQUEST_QUEUE)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._handle_in_order, receive)
            async with send:
                async for request in incoming(
                    self.websocket,
                    p.read_live_message,
                    max_bytes=MAX_FRAME_BYTES,
                    error=self._error,
                ):
                    try:
                        send.send_nowait(request)
                    except anyio.WouldBlock:
                        await self._error(f"more than {REQUEST_QUEUE} messages wait: not taken")

    async def _handle_in_order(self, receive: MemoryObjectReceiveStream[p.LiveMessage]) -> None:
        async with receive:
            async for request in receive:
                await self._handle(request)

    async def _handle(self, request: p.LiveMessage) -> None:
        try:
            await self._HANDLERS[type(request)](self, request)
        except SessionError as exc:
            await self._error(exc.message)
        except Exception as exc:  # the connection and the session live on
            self.log.exception("ws.request_failed", error=str(exc))
            await self._error(f"internal error: {exc}")

    async def _error(self, message: str) -> None:
        await self.push([p.ErrorFrame(message=message)])

    # ---------------------------------------------------------- one per message type

    async def _message(self, request: p.SendMessage) -> None:
        await self.server.navi.send(
            self.session_id,
            request.content,
            tuple(request.images),
            tuple(request.files),
            queue=request.queue,
        )

    async def _stop(self, request: p.Stop) -> None:
        await self.server.navi.stop(self.session_id)

    async def _try_again(self, request: p.TryAgain) -> None:
        await self.server.navi.try_again(self.session_id)  # the run waiting for the model

    async def _ping(self, request: p.Ping) -> None:
        await self.push([p.Pong()])

    async def _decide(self, request: p.Approve | p.Deny) -> None:
        approved = isinstance(request, p.Approve)
        await self.server.navi.decide(
            self.session_id,
            request.call_id,
            approved=approved,
            scope=request.scope if isinstance(request, p.Approve) else "once",
            by=self.user.id,
            reason=request.reason,
            stream_id=request.stream_id,
        )

    _HANDLERS: ClassVar[
        dict[type[p.ClientMessage], Callable[[Connection, Any], Awaitable[None]]]
    ] = {
        p.SendMessage: _message,
        p.Stop: _stop,
        p.Ping: _ping,
        p.TryAgain: _try_again,
        p.Approve: _decide,
        p.Deny: _decide,
    }
