"""The replay WebSocket ``/ws/sessions/{id}/replay?from=<seq>&to=<seq>&speed=<x|max>``.

It plays a recorded session again in the live protocol: the frames the live socket
sent (the same ``FrameTranslator``, primed with the events before ``from``; subagents'
frames interleaved and marked ``is_subagent``), each with its ``seq``, paced by the
recorded timestamps divided by ``speed`` (on the replay clock: idle time between runs
is cut short, see timeline.py). No LLM is called and nothing is written.

- ``from``: the first seq whose frames are sent (default 1); ``to``: the last (default
  the head); ``speed``: a factor (default 1) or ``max`` (no waiting).
- The client may send ``{"type": "pause"}``, ``{"type": "resume"}``,
  ``{"type": "seek", "seq": N}`` (play on from seq N, inclusive, like ``from``) and
  ``{"type": "speed", "speed": x | "max"}``; each is answered by a ``replay_status``
  frame ``{state: playing | paused | ended, seq, next_seq, from, to, head, speed}``.
- The end of ``to`` sends ``replay_end``; the socket stays open (a seek plays again).
- A bad message gets an ``error`` frame and the connection lives on; bad query
  parameters get an ``error`` frame and close 4400; an unknown session closes 4004.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import structlog
from starlette.websockets import WebSocket, WebSocketDisconnect

from navi.replay.history import session_head
from navi.replay.pacing import BadReplayRequest, parse_speed
from navi.server import protocol as p
from navi.server.incoming import incoming
from navi.server.protocol import Frame
from navi.server.replay.feed import ReplayFeed
from navi.server.state import ServerState, state_of
from navi.server.ws import CLOSE_TOO_SLOW, SEND_TIMEOUT, accept_session

log = structlog.get_logger(__name__)

CLOSE_BAD_REQUEST = 4400
MAX_MESSAGE_BYTES = 64 * 1024


def _seq_param(websocket: WebSocket, name: str) -> int | None:
    raw = websocket.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise BadReplayRequest(f"{name} must be a whole number, not {raw!r}") from None


async def replay_socket(websocket: WebSocket) -> None:
    session_id = await accept_session(websocket)
    if session_id is None:
        return
    server = state_of(websocket)
    head = await session_head(server.navi.store, session_id)
    try:
        start = _seq_param(websocket, "from") or 1
        to = _seq_param(websocket, "to")
        to = head if to is None else to
        speed = parse_speed(websocket.query_params.get("speed", "1"))
        if not 1 <= start <= max(1, head) or not start <= to <= head:
            raise BadReplayRequest(
                f"from and to must satisfy 1 <= from <= to <= {head} (got from={start}, to={to})"
            )
    except BadReplayRequest as exc:
        await websocket.send_text(p.encode(p.ErrorFrame(message=str(exc))))
        await websocket.close(code=CLOSE_BAD_REQUEST, reason="bad replay request")
        return
    player = ReplayPlayer(server, websocket, session_id, head, start=start, to=to, speed=speed)
    await player.serve()


class ReplayPlayer:
    def __init__(
        self,
        server: ServerState,
        websocket: WebSocket,
        session_id: str,
        head: int,
        *,
        start: int,
        to: int,
        speed: float | None,
    ) -> None:
        self.server = server
        self.websocket = websocket
        self.session_id = session_id
        self.head = head
        self.start = start
        self.to = to
        self.speed = speed
        self.next_seq = start  # the next session seq to play
        self.paused = False
        self.ended = False
        self.generation = 0  # bumped by every seek: the feed in progress is dropped
        self._wake = anyio.Event()
        self._sending = anyio.Lock()
        self._scope = anyio.CancelScope()
        self.log = log.bind(session_id=session_id)

    async def serve(self) -> None:
        with self._scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._play)
                await self._receive_loop()
                tg.cancel_scope.cancel()

    # ------------------------------------------------------------------ playing

    def _changed(self) -> None:
        self._wake.set()
        self._wake = anyio.Event()

    async def _play(self) -> None:
        await self._status()
        while True:
            generation = self.generation
            feed = ReplayFeed(
                self.server.navi.store,
                self.session_id,
                start=self.next_seq,
                to=self.to,
                max_context_tokens=self.server.max_context_tokens,
            )
            await feed.prime()
            t = 0.0
            finished = True
            async for step in feed.steps():
                if not await self._wait(step.t - t, generation):
                    finished = False
                    break
                t = step.t
                if step.frames:
                    await self._send(step.frames)
                self.next_seq = step.seq + 1
            if finished and generation == self.generation:
                self.ended = True
                end = p.ReplayEnd(seq=self.to, from_=self.start, to=self.to, head=self.head)
                await self._send([end])
            while generation == self.generation:  # until a seek plays again
                wake = self._wake
                await wake.wait()

    async def _wait(self, gap: float, generation: int) -> bool:
        """Wait ``gap`` seconds of the replay clock at the current speed, through pauses
        and speed changes; ``False`` if a seek made this feed obsolete."""
        remaining = max(0.0, gap)
        while True:
            if generation != self.generation:
                return False
            wake = self._wake
            if self.paused:
                await wake.wait()
                continue
            if self.speed is None or remaining <= 0:
                await anyio.lowlevel.checkpoint()  # let control messages in at max speed
                return generation == self.generation
            speed = self.speed
            started = anyio.current_time()
            with anyio.move_on_after(remaining / speed):
                await wake.wait()
                remaining -= (anyio.current_time() - started) * speed
                continue
            return generation == self.generation

    # ------------------------------------------------------------------ sending

    async def _send(self, frames: list[Frame]) -> None:
        async with self._sending:
            for frame in frames:
                with anyio.move_on_after(SEND_TIMEOUT) as timer:
                    try:
                        await self.websocket.send_text(p.encode(frame))
                    except (WebSocketDisconnect, RuntimeError, OSError):
                        self._scope.cancel()
                        return
                if timer.cancelled_caught:
                    self.log.warning("replay.slow_client_dropped")
                    self._scope.cancel()
                    with anyio.move_on_after(1, shield=True):
                        await self.websocket.close(code=CLOSE_TOO_SLOW, reason="client too slow")
                    return

    async def _status(self) -> None:
        state = "paused" if self.paused else "ended" if self.ended else "playing"
        await self._send(
            [
                p.ReplayStatus(
                    state=state,
                    seq=self.next_seq - 1,
                    next_seq=self.next_seq,
                    from_=self.start,
                    to=self.to,
                    head=self.head,
                    speed="max" if self.speed is None else self.speed,
                )
            ]
        )

    async def _error(self, message: str) -> None:
        await self._send([p.ErrorFrame(message=message)])

    # ------------------------------------------------------------------ receiving

    async def _receive_loop(self) -> None:
        async for request in incoming(
            self.websocket, p.read_replay_message, max_bytes=MAX_MESSAGE_BYTES, error=self._error
        ):
            try:
                self._handle(request)
            except BadReplayRequest as exc:
                await self._error(str(exc))
                continue
            await self._status()

    def _handle(self, request: p.ReplayMessage) -> None:
        if isinstance(request, p.Pause | p.Resume):
            self.paused = isinstance(request, p.Pause)
        elif isinstance(request, p.Speed):
            if request.speed is None:
                raise BadReplayRequest("a speed message needs 'speed': a number or 'max'")
            self.speed = parse_speed(request.speed)
        else:
            if request.seq is None or not 1 <= request.seq <= self.to:
                raise BadReplayRequest(f"a seek needs 'seq' from 1 to {self.to}")
            self.next_seq = request.seq
            self.ended = False
            self.generation += 1
        self._changed()
