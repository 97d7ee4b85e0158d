"""The stream guard: timeouts and stop around a backend's raw chunk stream.

A backend parses its wire format into *batches*: one batch per network read (or per
generated token), possibly empty when bytes arrived that completed no chunk (a role
delta, a fragment of tool-call arguments). Every batch proves the server is alive,
so the timers restart on each one, not only on chunks a user would see. Batching
also keeps the guard's cost (a little per read) off the per-chunk path.

One mechanism ends a wait for the next batch: ``anext(raw)`` is awaited inside a cancel
scope (:meth:`StopSignal.scope`) that the stop signal cancels and whose deadline is the
first-chunk timeout, then the gap timeout. A cancelled wait unwinds the raw generator's
``async with`` on the HTTP response, which closes the connection, so the server stops
generating.

No task, and no scope held across a ``yield``.

A stop ends the stream cleanly with ``FinalChunk(finish_reason="stopped")``; it is
never an exception.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

import anyio

from navi.llm.errors import IncompleteStream, LLMTimeout
from navi.llm.stop import StopSignal
from navi.llm.types import FinalChunk, StreamChunk

__all__ = ["RawBatches", "guard_stream"]

RawBatches = AsyncGenerator[Sequence[StreamChunk], None]

STOPPED = FinalChunk(finish_reason="stopped")


async def guard_stream(
    raw: RawBatches,
    *,
    stop: StopSignal | None,
    first_chunk_timeout: float,
    chunk_timeout: float,
    url: str = "",
) -> AsyncGenerator[StreamChunk, None]:
    """Yield the chunks of ``raw``, ending with exactly one :class:`FinalChunk`.

    Raises :class:`LLMTimeout` when the first batch takes longer than
    ``first_chunk_timeout`` or a later one longer than ``chunk_timeout``, and
    :class:`IncompleteStream` when ``raw`` ends without a final chunk.
    """
    signal = stop if stop is not None else StopSignal()
    async with aclosing(raw):
        if signal.is_set():
            yield STOPPED
            return
        timeout = first_chunk_timeout
        first = True
        while True:
            batch: Sequence[StreamChunk] | None = None
            with signal.scope(anyio.current_time() + timeout) as scope:
                batch = await anext(raw, None)
            if scope.cancelled_caught:
                if signal.is_set():
                    yield STOPPED
                    return
                raise LLMTimeout(timeout, first_chunk=first, url=url)
            if batch is None:
                raise IncompleteStream("the server closed the stream without finishing", url=url)
            if first:
                first = False
                timeout = chunk_timeout
            for chunk in batch:
                # The consumer may have asked to stop while handling the last chunk.
                if signal.is_set():
                    yield STOPPED
                    return
                yield chunk
                if type(chunk) is FinalChunk:
                    return
