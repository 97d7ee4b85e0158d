"""Following a ``/v1`` run to its end: the plain answer (``collect``), the streamed one
(:class:`RunStream`: SSE chunks as the run's events become durable, keep-alive
comments while it is silent), and how a run that did not keep its word is answered.

A client that hangs up stops the run, as the Stop button does
(``stop.requested(reason="client_disconnected")``), unless a retry of the same request
follows the run within the ledger's grace (ledger.py).
"""

from __future__ import annotations

import functools
import time
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from events.types import CallOptions
from navi.server.openai.errors import OpenAIError
from navi.server.openai.events import RunReader, merged
from navi.server.openai.ledger import Entry, Ledger, stop_unless_retried
from navi.server.openai.options import answer_mismatch, mismatch_error
from navi.server.openai.wire import SSE_DONE, SSE_KEEPALIVE, chunk, sse

if TYPE_CHECKING:
    from navi.app import Navi

log = structlog.get_logger(__name__)

KEEPALIVE_S = 10.0
STREAM_QUEUE = 256  # chunks waiting for a slow client; then the log is read more slowly
STOP_REASON = "client_disconnected"


def run_error(reader: RunReader, options: CallOptions | None) -> OpenAIError | None:
    """How a run that did not keep its word is answered: a 502 when a retry is safe
    (nothing acted), else a 422, which the OpenAI SDKs do not retry (docs/api.md)."""
    if reader.ending == "failed":
        status = 422 if reader.acted else 502
        return OpenAIError(status, f"the run failed: {reader.error}", code="run_failed")
    if reader.ending == "completed":
        reason = answer_mismatch(reader.answer, options)
        if reason is not None:
            return mismatch_error(reason, acted=reader.acted)
    return None


def no_retry(reader: RunReader) -> dict[str, str]:
    """``x-should-retry: false`` (read by the official SDKs) once a tool has acted."""
    return {"x-should-retry": "false"} if reader.acted else {}


async def stop_for_client(navi: Navi, session_id: str) -> None:
    with anyio.move_on_after(10, shield=True):
        await navi.stop(session_id, STOP_REASON)
    log.info("openai.client_disconnected", session_id=session_id)


async def collect(navi: Navi, ledger: Ledger, entry: Entry, receive: Receive) -> RunReader | None:
    """Follow the run to its end (None: the client hung up first; the run is stopped
    unless a retry follows it)."""
    reader = RunReader(run_id=entry.reply.run_id)
    gone = False

    async def watch(scope: anyio.CancelScope) -> None:
        nonlocal gone
        while (await receive())["type"] != "http.disconnect":
            pass
        gone = True
        scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch, tg.cancel_scope)
        batches = navi.store.subscribe_batches(entry.session_id, after_seq=entry.reply.after_seq)
        async with aclosing(batches):
            async for batch in batches:
                for record in batch:
                    reader.feed(record)
                if reader.ending is not None:
                    break
        tg.cancel_scope.cancel()
    if gone and reader.ending is None:
        await stop_unless_retried(
            navi.store, ledger, entry, lambda: stop_for_client(navi, entry.session_id)
        )
        return None
    return reader


class RunStream(Response):
    """The streamed answer: SSE ``data:`` chunks as the run's events become durable,
    keep-alive comments while it is silent, then ``data: [DONE]``. A ``Response`` with
    no body of its own (as Starlette's ``StreamingResponse``): no ``Content-Length``."""

    media_type = "text/event-stream; charset=utf-8"

    def __init__(
        self,
        navi: Navi,
        entry: Entry,
        model: str,
        include_usage: bool,
        headers: dict[str, str],
        options: CallOptions | None,
        ledger: Ledger,
        approve_at: str = "",
    ) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers({**headers, "cache-control": "no-cache", "x-accel-buffering": "no"})
        self.navi = navi
        self.entry = entry
        self.ledger = ledger
        self.session_id = entry.session_id
        self.reply = entry.reply
        self.model = model
        self.include_usage = include_usage
        self.options = options
        self.reader = RunReader(
            run_id=entry.reply.run_id,
            approve_at=approve_at,
            notes_as_reasoning=options is not None and options.response_format is not None,
        )
        self.created = int(time.time())
        self.gone = False

    def _chunk(self, **fields: Any) -> bytes:
        return sse(
            chunk(
                id=f"chatcmpl-{self.reply.run_id}", created=self.created, model=self.model, **fields
            )
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        await send(start)
        out, frames = anyio.create_memory_object_stream[bytes](STREAM_QUEUE)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._follow, out)
            tg.start_soon(self._watch, receive, tg.cancel_scope)
            try:
                await self._send_frames(frames, send)
            except OSError:  # the client is gone (uvicorn's ClientDisconnected)
                self.gone = True
            tg.cancel_scope.cancel()
        if self.gone:
            if self.reader.ending is None:
                stop = functools.partial(stop_for_client, self.navi, self.session_id)
                await stop_unless_retried(self.navi.store, self.ledger, self.entry, stop)
            else:
                await self._leave()
            return
        await self._leave()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _leave(self) -> None:
        with anyio.CancelScope(shield=True):  # the client may be gone: still counted
            await self.ledger.leave(self.entry)

    async def _send_frames(self, frames: Any, send: Send) -> None:
        async with frames:
            while True:
                data = SSE_KEEPALIVE
                with anyio.move_on_after(KEEPALIVE_S):
                    try:
                        data = await frames.receive()
                    except anyio.EndOfStream:
                        return
                await send({"type": "http.response.body", "body": data, "more_body": True})

    async def _watch(self, receive: Receive, scope: anyio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.gone = True
        scope.cancel()

    async def _follow(self, out: Any) -> None:
        reader = self.reader
        store = self.navi.store
        async with out:
            await out.send(self._chunk(delta={"role": "assistant", "content": ""}))
            batches = store.subscribe_batches(self.session_id, after_seq=self.reply.after_seq)
            async with aclosing(batches):
                async for batch in batches:
                    pieces = [piece for record in batch for piece in reader.feed(record)]
                    for kind, text in merged(pieces):
                        key = "content" if kind == "content" else "reasoning_content"
                        await out.send(self._chunk(delta={key: text}))
                    if reader.ending is not None:
                        break
            failed = run_error(reader, self.options)
            if failed is not None:
                if not reader.acted:
                    await self.ledger.forget(self.entry)
                await out.send(sse(failed.body()))
            else:
                await out.send(self._chunk(delta={}, finish_reason="stop"))
                if self.include_usage:
                    await out.send(self._chunk(usage=reader.usage))
            await out.send(SSE_DONE)
