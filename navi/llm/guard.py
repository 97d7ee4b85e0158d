"""The stream guard: timeouts and stop around a backend's raw chunk stream.

A backend parses its wire format into *batches*: one batch per network read (or per
generated token), possibly empty when bytes arrived that completed no chunk (a role
delta, a fragment of tool-call arguments). Every batch proves the server is alive,
so the timers restart on each one, not only on chunks a user would see. Batching
also keeps the guard's cost (a little per read) off the per-chunk path.

Two ways to end a wait for the next batch, both ending with the raw generator's
``async with`` on the HTTP response unwound, which closes the connection, so the
server stops generating:

* a raw stream of the lean HTTP client comes with a :class:`Watchdog`: its waits are
  bound to it, and the stop or a deadline aborts them directly
  (:class:`StreamInterrupted`); one timer per stream, no cancel scope per read;
* any other (httpx, the embedded backend, tests) is awaited inside one cancel scope
  around ``anext(raw)`` with the stop signal and the deadline.

No task, and no scope held across a ``yield``.

A stop ends the stream cleanly with ``FinalChunk(finish_reason="stopped")``; it is
never an exception.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

import anyio

from navi.llm.errors import IncompleteStream, LLMTimeout
from navi.llm.stop import StopSignal
from navi.llm.types import FinalChunk, StreamChunk
from navi.llm.watchdog import StreamInterrupted, Watchdog

__all__ = ["RawBatches", "guard_stream"]

RawBatches = AsyncGenerator[Sequence[StreamChunk], None]

STOPPED = FinalChunk(finish_reason="stopped")


def guard_stream(
    raw: RawBatches,
    *,
    stop: StopSignal | None,
    first_chunk_timeout: float,
    chunk_timeout: float,
    url: str = "",
    watchdog: Watchdog | None = None,
) -> AsyncGenerator[StreamChunk, None]:
    """Yield the chunks of ``raw``, ending with exactly one :class:`FinalChunk`.

    Raises :class:`LLMTimeout` when the first batch takes longer than
    ``first_chunk_timeout`` or a later one longer than ``chunk_timeout``, and
    :class:`IncompleteStream` when ``raw`` ends without a final chunk. ``watchdog``:
    the one ``raw`` binds its waits to, if any (see :mod:`navi.llm.watchdog`).
    """
    signal = stop if stop is not None else StopSignal()
    if watchdog is not None:
        return _watched(raw, signal, watchdog, first_chunk_timeout, chunk_timeout, url)
    return _scoped(raw, signal, first_chunk_timeout, chunk_timeout, url)


async def _watched(
    raw: RawBatches,
    signal: StopSignal,
    watchdog: Watchdog,
    first_chunk_timeout: float,
    chunk_timeout: float,
    url: str,
) -> AsyncGenerator[StreamChunk, None]:
    async with aclosing(raw):
        if signal.is_set():
            yield STOPPED
            return
        watchdog.start(signal, first_chunk_timeout, chunk_timeout)
        try:
            while True:
                if signal.is_set():  # set while the consumer had the last batch
                    yield STOPPED
                    return
                watchdog.since = time.monotonic()
                watchdog.waiting = True
                try:
                    batch = await anext(raw, None)
                except StreamInterrupted:
                    interrupted = True
                else:
                    interrupted = False
                watchdog.waiting = False
                if interrupted:
                    if signal.is_set():
                        yield STOPPED
                        return
                    raise LLMTimeout(watchdog.timeout, first_chunk=watchdog.first, url=url)
                if batch is None:
                    raise IncompleteStream(
                        "the server closed the stream without finishing", url=url
                    )
                if watchdog.first:
                    watchdog.got_first_batch()
                for chunk in batch:
                    # The consumer may have asked to stop while handling the last chunk.
                    if signal.is_set():
                        yield STOPPED
                        return
                    yield chunk
                    if type(chunk) is FinalChunk:
                        return
        finally:
            watchdog.stop()


async def _scoped(
    raw: RawBatches,
    signal: StopSignal,
    first_chunk_timeout: float,
    chunk_timeout: float,
    url: str,
) -> AsyncGenerator[StreamChunk, None]:
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
