"""A session's stream as its actor writes it: each event checked against the run state
machine, written through the stream's writer (events/writer.py), and applied to the
session's state — a recorded event once it is durable, a staged chunk at once.

The session lock orders them: no ``record`` comes between a chunk's check and its
apply, and a decision is applied only after everything before it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from events.envelope import NewEvent, Recorded
from events.store import EventStore
from events.types import Event, RunStarted, UserMessage
from events.writer import StreamWriter
from navi.run.progress import check_call_order
from navi.run.state import RunState, transition
from navi.session.lock import SessionLock
from navi.session.recovery import recover
from navi.session.state import SessionState

# The events that carry the run id of the run they start (recorded before it is active).
_STARTS_RUN = frozenset({UserMessage, RunStarted})
RECOVERY_PAGE = 5000


class SessionStream:
    def __init__(self, store: EventStore, session_id: str, clock: Callable[[], float]):
        self.store = store
        self.session_id = session_id
        self.clock = clock
        self.state = SessionState()
        self.run_id: str | None = None  # of the run the events recorded now belong to
        # Taken on every record and stage: uncontended, without a loop turn.
        self.lock = SessionLock()
        self._writer: StreamWriter | None = None

    async def open(self) -> StreamWriter:
        """Fold the session's stream into a fresh state; returns the writer, for the
        caller to run in its task group."""
        await self.close()
        self.state = SessionState()
        self._writer = await recover(self.store, self.session_id, self.state, page=RECOVERY_PAGE)
        self.run_id = self.state.progress.run_id if self.state.run_active else None
        return self._writer

    async def close(self) -> None:
        """End the writer once it has committed what is queued."""
        writer, self._writer = self._writer, None
        if writer is not None:
            await writer.aclose()

    async def record(self, *events: Event) -> None:
        """Check events against the run state machine, append them, wait until they are
        durable, then apply them to the state. An illegal event changes nothing."""
        async with self.lock:
            await self.record_locked(events)

    async def record_locked(self, events: Sequence[Event]) -> None:
        """``record``, for a caller that holds the lock."""
        assert self._writer is not None
        check_call_order(self.state.progress, events)
        state = self.state.run_state
        after: list[RunState] = []
        for event in events:
            state = transition(state, event)
            after.append(state)
        records = await self._writer.append(*[self._new(e) for e in events])
        # Checked above, under the lock: nothing else is applied meanwhile.
        for record, run_state in zip(records, after, strict=True):
            self.state.apply(record, run_state)

    async def stage(self, event: Event) -> None:
        """Stage a chunk event: applied now, durable within milliseconds. Waits only
        while the writer's queue is full."""
        writer = self._writer
        assert writer is not None
        async with self.lock:
            run_state = transition(self.state.run_state, event)
            seq = await writer.stage(self._new(event))
            record = Recorded(
                stream_id=self.session_id,
                seq=seq,
                position=0,
                event_id="",
                timestamp=self.clock(),
                event=event,
                run_id=self.run_id,
            )
            self.state.apply(record, run_state)

    async def commit(self) -> None:
        """Wait until everything staged is durable."""
        assert self._writer is not None
        async with self.lock:
            await self._writer.commit()

    def _new(self, event: Event) -> NewEvent:
        in_run = self.state.run_active or type(event) in _STARTS_RUN
        return NewEvent(event=event, run_id=self.run_id if in_run else None)
