"""``PersistentActor``: an actor whose state is a fold over its event stream.

Handling a message:

    events   = await decide(state, message)     # which events to append; no effects
    recorded = await persist(events)            # one atomic append at expected_seq
    state    = evolve(state, r) for r in recorded  # pure, applied only after the commit
    reply    = await effects(state, message, recorded)  # side effects, after the commit

If the append fails nothing is evolved and no effect runs: the error propagates like
any failure of ``receive`` (the asker gets it, the supervisor decides).

Recovery (``on_start``, so also after every restart) folds ``evolve`` over the stream
from the store. Appends carry ``expected_seq`` = the last seq this actor knows, so a
second writer on the same stream gets ``events.errors.ConcurrencyError``.

Our choice on a conflict: it is a failure like any other. Nothing is written, the
message is not retried, the asker receives the ``ConcurrencyError``; under the default
``restart`` policy the actor restarts, and restarting re-recovers the stream (so the
next message is decided on the events the other writer added). Under ``stop`` the actor
stops, leaving the stream to the other writer. Retrying a decision silently could act
on a state the caller never saw, so we don't.

Streaming many small events: ``stage(event)`` buffers chunk events (``boundary =
False``) instead of appending each. The buffer is flushed in one append when a
boundary event is staged, when it holds ``flush_max_events`` events, when its oldest
event is ``flush_interval`` seconds old at the next ``stage``, at ``persist`` (staged
events go first, in the same append) or on ``flush()``. Inside ``async with
self.streaming():`` a ticker also flushes every ``flush_interval`` while events wait,
so a pause in the stream does not hold back what was already staged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Generic, TypeVar

import anyio
import structlog

from actors.actor import Actor
from events.envelope import NewEvent, Recorded, as_new
from events.errors import ConcurrencyError
from events.store import EventStore
from events.types import Event

log = structlog.get_logger(__name__)

S = TypeVar("S")
M = TypeVar("M")


class PersistentActor(Actor[M], Generic[S, M]):
    flush_max_events: ClassVar[int] = 64
    flush_interval: ClassVar[float] = 0.005
    recovery_page_size: ClassVar[int] = 1000

    def __init__(self, store: EventStore, stream_id: str) -> None:
        self.store = store
        self.stream_id = stream_id
        self.last_seq = 0
        self._state: S = None  # type: ignore[assignment]  # set by recover()
        self._recovered = False
        self._staged: list[NewEvent] = []
        self._staged_since = 0.0
        self._write_lock: anyio.Lock | None = None

    # ---------------------------------------------------------------- to implement

    def initial_state(self) -> S:
        raise NotImplementedError(f"{type(self).__name__} must implement initial_state()")

    def evolve(self, state: S, recorded: Recorded) -> S:
        """The state after ``recorded``. Pure: no I/O, no clock, no randomness."""
        raise NotImplementedError(f"{type(self).__name__} must implement evolve()")

    async def decide(self, state: S, message: M) -> Sequence[Event | NewEvent]:
        """Which events ``message`` leads to. No side effects here: nothing is written
        yet, and the append may still fail."""
        raise NotImplementedError(f"{type(self).__name__} must implement decide()")

    async def effects(self, state: S, message: M, recorded: Sequence[Recorded]) -> Any:
        """Side effects of ``message``; runs only once ``recorded`` is committed, with
        the evolved state. Its return value is the reply to an ask."""
        return None

    # ---------------------------------------------------------------- state

    @property
    def state(self) -> S:
        if not self._recovered:
            raise RuntimeError(f"{type(self).__name__}: state is read before recovery")
        return self._state

    async def on_start(self) -> None:
        await self.recover()

    async def recover(self) -> None:
        """Rebuild the state from the stream (staged, uncommitted events are dropped)."""
        state = self.initial_state()
        seq = 0
        while True:
            page = await self.store.read(
                self.stream_id, after_seq=seq, limit=self.recovery_page_size
            )
            for recorded in page:
                state = self.evolve(state, recorded)
                seq = recorded.seq
            if len(page) < self.recovery_page_size:
                break
        self._state, self.last_seq, self._recovered = state, seq, True
        self._staged = []
        log.debug("actor.recovered", actor=self.path, stream=self.stream_id, seq=seq)

    async def receive(self, message: M) -> Any:
        events = await self.decide(self.state, message)
        recorded = await self.persist(events)
        return await self.effects(self.state, message, recorded)

    # ---------------------------------------------------------------- writing

    async def persist(self, events: Sequence[Event | NewEvent]) -> list[Recorded]:
        """Append staged events then ``events`` in one atomic append, evolve the state
        and return the records of ``events``."""
        new = [as_new(e) for e in events]
        if not new and not self._staged:
            return []
        recorded = await self._append(new)
        return recorded[len(recorded) - len(new) :] if new else []

    async def stage(self, event: Event | NewEvent) -> None:
        """Buffer ``event`` for a later append; flush when the batch is due."""
        if not self._staged:
            self._staged_since = anyio.current_time()
        item = as_new(event)
        self._staged.append(item)
        if (
            type(item.event).boundary
            or len(self._staged) >= self.flush_max_events
            or anyio.current_time() - self._staged_since >= self.flush_interval
        ):
            await self.flush()

    async def flush(self) -> list[Recorded]:
        """Append what is staged now; return its records."""
        return await self._append([]) if self._staged else []

    @asynccontextmanager
    async def streaming(self) -> AsyncIterator[None]:
        """Flush staged events at least every ``flush_interval`` while inside, and the
        rest on the way out. If the body fails, what is still staged stays staged: the
        next ``persist``/``flush`` writes it first (so a stream that broke keeps the
        chunks it produced), and a restart's recovery drops it."""
        ticker_error: list[Exception] = []

        async def tick(scope: anyio.CancelScope) -> None:
            while True:
                await anyio.sleep(self.flush_interval)
                if self._staged and anyio.current_time() - self._staged_since >= (
                    self.flush_interval
                ):
                    try:
                        await self.flush()
                    except Exception as error:
                        ticker_error.append(error)
                        scope.cancel()
                        return

        body_error: BaseException | None = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(tick, tg.cancel_scope)
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The ticker never raises, so the group wraps the body's own exception:
            # give it back to the caller as it was raised.
            if len(group.exceptions) != 1:
                raise
            body_error = group.exceptions[0]
        if body_error is not None:
            raise body_error
        if ticker_error:
            raise ticker_error[0]
        await self.flush()

    async def _append(self, new: list[NewEvent]) -> list[Recorded]:
        if self._write_lock is None:
            self._write_lock = anyio.Lock()
        async with self._write_lock:
            batch = self._staged + new
            self._staged = []
            if not batch:
                return []
            try:
                recorded = await self.store.append(
                    self.stream_id, batch, expected_seq=self.last_seq
                )
            except ConcurrencyError:
                log.warning(
                    "actor.write_conflict",
                    actor=self.path,
                    stream=self.stream_id,
                    expected_seq=self.last_seq,
                )
                raise
            state = self.state
            for record in recorded:
                state = self.evolve(state, record)
            self._state = state
            if recorded:
                self.last_seq = recorded[-1].seq
            return recorded
