"""The stream watchdog: stop and timeouts for a lean HTTP stream, without a cancel
scope per read.

The stream guard (:mod:`navi.llm.guard`) must end a wait for the next batch when the
stop signal is set or a deadline passes. Around an arbitrary raw stream it does so
with one anyio cancel scope per read, and a scope is costly to make, enter and leave
(the backend lookup, the current task, a timer per deadline): a good part of Navi's
CPU per LLM call. The lean HTTP client (:mod:`navi.llm.lean_http`) waits on futures of
its own, so it can be woken directly instead:

* the raw stream *binds* its current wait to the watchdog (:meth:`Watchdog.watch`): a
  callable that aborts it, :meth:`Connection.interrupt
  <navi.llm.lean_conn.Connection.interrupt>` (or a connect's cancel scope). An aborted
  wait raises :class:`StreamInterrupted`, which unwinds the raw generator's ``async
  with`` on the response (so the connection closes and the server stops generating)
  and reaches the guard, which turns it into the stop or the timeout;
* a stop reaches the watchdog through a hook on the :class:`StopSignal`, registered
  once per stream;
* both deadlines (first batch, between batches) share one asyncio timer per stream,
  re-armed lazily: when it fires it compares the clock with the start of the current
  wait (:attr:`Watchdog.since`, set by the guard before each read), and either aborts
  the wait or sleeps until the wait's own deadline. A fast stream never sees it fire.

Times are ``time.monotonic()`` and delays ``loop.call_later``: no anyio call, and no
mix of absolute times from two clocks (uvloop's ``loop.time()`` is its own).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from navi.llm.stop import StopSignal

__all__ = ["StreamInterrupted", "Watchdog"]


class StreamInterrupted(Exception):
    """A watched wait cut short by its watchdog (a stop or a timeout). Never leaves the
    guard: it becomes ``FinalChunk(finish_reason="stopped")`` or :class:`LLMTimeout`.
    Deliberately not an ``OSError``: the lean client must not take it for a dead
    connection and retry."""


class Watchdog:
    """Stop and deadlines for one stream. Made by the backend for a stream of the lean
    client, handed to both the raw stream (which binds its waits) and the guard (which
    starts it, tells it when it waits for a batch, and stops it at the end)."""

    __slots__ = (
        "_abort",
        "_chunk_timeout",
        "_handle",
        "_loop",
        "_signal",
        "fired",
        "first",
        "since",
        "timeout",
        "waiting",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._abort: Callable[[], None] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._signal: StopSignal | None = None
        self._chunk_timeout = 0.0
        self.timeout = 0.0  # the deadline of the current wait, after its start
        self.first = True  # no batch yet: ``timeout`` is the first-chunk timeout
        self.since = 0.0  # time.monotonic() at the start of the current wait
        self.waiting = False  # the guard waits for a batch (else the consumer has one)
        self.fired = False  # a stop or a timeout aborted (or will abort) the stream

    # ------------------------------------------------------------ the raw stream's side

    def watch(self, abort: Callable[[], None] | None) -> None:
        """From now on a stop or timeout calls ``abort`` (``None``: nothing to abort).
        If one already happened, ``abort`` is called at once."""
        self._abort = abort
        if self.fired and abort is not None:
            abort()

    def check(self) -> None:
        """Raise :class:`StreamInterrupted` if a stop or a timeout happened."""
        if self.fired:
            raise StreamInterrupted

    # ------------------------------------------------------------ the guard's side

    def start(self, signal: StopSignal, first_chunk_timeout: float, chunk_timeout: float) -> None:
        """Begin guarding: the stop hook and the one timer of the stream."""
        self._signal = signal
        self.timeout = first_chunk_timeout
        self._chunk_timeout = chunk_timeout
        self.first = True
        signal.add_hook(self._on_stop)
        # The sooner of the two deadlines (and never later than the gap timeout when
        # re-armed): the timer never needs to be brought forward when the first batch
        # switches to a shorter gap timeout.
        delay = min(first_chunk_timeout, chunk_timeout)
        self._handle = self._loop.call_later(delay, self._on_timer)

    def got_first_batch(self) -> None:
        self.first = False
        self.timeout = self._chunk_timeout

    def stop(self) -> None:
        """The stream ended: cancel the timer, drop the hook and the bound wait."""
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.cancel()
        signal, self._signal = self._signal, None
        if signal is not None:
            signal.remove_hook(self._on_stop)
        self._abort = None
        self.waiting = False

    # ------------------------------------------------------------ callbacks

    def _on_stop(self) -> None:
        # Aborts even while the consumer holds a batch: the connection keeps the
        # interruption for its next wait (the guard checks the signal first anyway).
        self._fire()

    def _on_timer(self) -> None:
        self._handle = None
        if self._signal is None:  # (stopped meanwhile: cannot happen, a cancelled
            return  # handle does not run, but a stale timer must never abort)
        if self.waiting:
            delay = self.since + self.timeout - time.monotonic()
            if delay <= 0:
                self._fire()
                return
        else:
            # The consumer has the last batch: the next wait starts later than now.
            delay = self.timeout
        # Never past the gap timeout: the first batch may come meanwhile and make it
        # the timeout of the next wait.
        delay = min(delay, self._chunk_timeout)
        self._handle = self._loop.call_later(delay, self._on_timer)

    def _fire(self) -> None:
        if self.fired:
            return
        self.fired = True
        abort = self._abort
        if abort is not None:
            abort()
