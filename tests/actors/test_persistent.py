from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from actors import ActorSystem, Backoff, PersistentActor, Supervision
from events.envelope import NewEvent, Recorded
from events.errors import ConcurrencyError
from events.memory import InMemoryEventStore
from events.types import Event, LLMCompleted, LLMText, NoteDeleted, NoteSaved

pytestmark = pytest.mark.anyio

FAST = Supervision.restart(backoff=Backoff(initial=0.01, maximum=0.02))
STREAM = "notes-1"

Notes = tuple[tuple[str, str], ...]  # (note_id, text), in order


@pytest.fixture
async def store() -> AsyncIterator[InMemoryEventStore]:
    async with InMemoryEventStore() as store:
        yield store


class FlakyStore:
    """An event store whose appends fail while ``failing`` is set."""

    def __init__(self, inner: InMemoryEventStore) -> None:
        self.inner = inner
        self.failing = False
        self.appends = 0

    async def append(
        self, stream_id: str, events: Sequence[Event | NewEvent], *, expected_seq: int, **kw: Any
    ) -> list[Recorded]:
        if self.failing:
            raise OSError("disk full")
        self.appends += 1
        return await self.inner.append(stream_id, events, expected_seq=expected_seq, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class NotesActor(PersistentActor[Notes, Any]):
    """Messages: ("save", id, text) · ("delete", id) · "get" · ("stream", n)."""

    def __init__(self, store: Any, stream_id: str = STREAM, trace: list[str] | None = None):
        super().__init__(store, stream_id)
        self.trace = trace if trace is not None else []

    def initial_state(self) -> Notes:
        return ()

    def evolve(self, state: Notes, recorded: Recorded) -> Notes:
        self.trace.append(f"evolve {recorded.seq}")
        match recorded.event:
            case NoteSaved(note_id=note_id, text=text):
                return (*state, (note_id, text))
            case NoteDeleted(note_id=note_id):
                return tuple(n for n in state if n[0] != note_id)
        return state

    async def decide(self, state: Notes, message: Any) -> Sequence[Event]:
        self.trace.append("decide")
        match message:
            case ("save", note_id, text):
                if any(n[0] == note_id for n in state):
                    raise ValueError(f"note {note_id!r} exists")
                return [NoteSaved(note_id=note_id, text=text)]
            case ("delete", note_id):
                return [NoteDeleted(note_id=note_id)]
        return []

    async def effects(self, state: Notes, message: Any, recorded: Sequence[Recorded]) -> Any:
        # Effects run after the commit: what they act on is already in the log.
        log = await self.store.read(self.stream_id)
        assert [r.event for r in recorded] == [r.event for r in log[len(log) - len(recorded) :]]
        self.trace.append(f"effects {[r.seq for r in recorded]}")
        if isinstance(message, tuple) and message[0] == "stream":
            return await self.stream(message[1])
        return state

    async def stream(self, chunks: int) -> int:
        async with self.streaming():
            for i in range(chunks):
                await self.stage(LLMText(text=f"{i} "))
        await self.persist([LLMCompleted(content="done")])
        return self.last_seq


async def test_decide_append_evolve_effects_in_that_order(store: InMemoryEventStore) -> None:
    trace: list[str] = []
    async with ActorSystem() as system:
        ref = await system.spawn(NotesActor(store, trace=trace), name="notes")
        state = await ref.ask(("save", "n1", "buy milk"), timeout=5)
        assert state == (("n1", "buy milk"),)
        assert await ref.ask(("save", "n2", "call mum"), timeout=5) == (
            ("n1", "buy milk"),
            ("n2", "call mum"),
        )
    assert trace == ["decide", "evolve 1", "effects [1]", "decide", "evolve 2", "effects [2]"]
    assert [r.event for r in await store.read(STREAM)] == [
        NoteSaved(note_id="n1", text="buy milk"),
        NoteSaved(note_id="n2", text="call mum"),
    ]


async def test_recovery_folds_the_stream(store: InMemoryEventStore) -> None:
    await store.append(
        STREAM,
        [NoteSaved(note_id=f"n{i}", text=str(i)) for i in range(5)] + [NoteDeleted(note_id="n1")],
        expected_seq=0,
    )

    class SmallPages(NotesActor):
        recovery_page_size = 2

    async with ActorSystem() as system:
        actor = SmallPages(store)
        ref = await system.spawn(actor, name="notes")
        state = await ref.ask("get", timeout=5)
        assert [n[0] for n in state] == ["n0", "n2", "n3", "n4"]
        assert actor.last_seq == 6
        # The next append continues the stream.
        await ref.ask(("save", "n5", "5"), timeout=5)
        assert await store.last_seq(STREAM) == 7


async def test_a_failed_decision_appends_nothing(store: InMemoryEventStore) -> None:
    async with ActorSystem() as system:
        ref = await system.spawn(NotesActor(store), name="notes", supervision=FAST)
        await ref.ask(("save", "n1", "a"), timeout=5)
        with pytest.raises(ValueError, match="note 'n1' exists"):
            await ref.ask(("save", "n1", "b"), timeout=5)
        assert await store.last_seq(STREAM) == 1
        assert await ref.ask("get", timeout=5) == (("n1", "a"),)


async def test_no_effect_runs_when_the_append_fails(store: InMemoryEventStore) -> None:
    flaky = FlakyStore(store)
    trace: list[str] = []
    async with ActorSystem() as system:
        actor = NotesActor(flaky, trace=trace)
        ref = await system.spawn(actor, name="notes", supervision=FAST)
        await ref.ask(("save", "n1", "a"), timeout=5)
        flaky.failing = True
        trace.clear()
        with pytest.raises(OSError, match="disk full"):
            await ref.ask(("save", "n2", "b"), timeout=5)
        assert trace == ["decide"]  # no evolve, no effects
        assert actor.state == (("n1", "a"),)
        flaky.failing = False
        assert await ref.ask("get", timeout=5) == (("n1", "a"),)
        assert await store.last_seq(STREAM) == 1


async def test_a_second_writer_hits_a_concurrency_error_then_recovers(
    store: InMemoryEventStore,
) -> None:
    async with ActorSystem() as system:
        first = await system.spawn(NotesActor(store), name="w1", supervision=FAST)
        second = await system.spawn(NotesActor(store), name="w2", supervision=FAST)
        assert await second.ask("get", timeout=5) == ()  # recovered at seq 0
        await first.ask(("save", "a", "from w1"), timeout=5)
        with pytest.raises(ConcurrencyError) as info:
            await second.ask(("save", "b", "from w2"), timeout=5)
        assert info.value.expected_seq == 0
        # Nothing of w2 was written; after its restart it knows w1's event.
        assert await store.last_seq(STREAM) == 1
        assert await second.ask("get", timeout=5) == (("a", "from w1"),)
        assert await second.ask(("save", "b", "from w2"), timeout=5) == (
            ("a", "from w1"),
            ("b", "from w2"),
        )


async def test_a_conflict_under_the_stop_policy_stops_the_writer(
    store: InMemoryEventStore,
) -> None:
    async with ActorSystem() as system:
        first = await system.spawn(NotesActor(store), name="w1")
        second = await system.spawn(NotesActor(store), name="w2", supervision=Supervision.stop())
        await second.ask("get", timeout=5)
        await first.ask(("save", "a", "x"), timeout=5)
        with pytest.raises(ConcurrencyError):
            await second.ask(("save", "b", "y"), timeout=5)
        await second.wait_stopped()


async def test_staged_chunks_are_appended_in_batches(store: InMemoryEventStore) -> None:
    flaky = FlakyStore(store)

    class Batching(NotesActor):
        flush_max_events = 10
        flush_interval = 60.0  # only the count and the boundary flush here

    async with ActorSystem() as system:
        ref = await system.spawn(Batching(flaky), name="notes")
        last = await ref.ask(("stream", 35), timeout=5)
    events = [r.event for r in await store.read(STREAM)]
    assert last == len(events) == 36
    assert events[:35] == [LLMText(text=f"{i} ") for i in range(35)]
    assert events[35] == LLMCompleted(content="done")
    # 3 full batches of 10, then the streaming() exit flushes the last 5.
    assert flaky.appends == 5


async def test_a_boundary_event_flushes_the_stage(store: InMemoryEventStore) -> None:
    async with ActorSystem() as system:
        actor = NotesActor(store)
        await system.spawn(actor, name="notes")
        await actor.ref.ask("get", timeout=5)  # recovered
        await actor.stage(LLMText(text="a"))
        await actor.stage(LLMText(text="b"))
        assert await store.last_seq(STREAM) == 0
        await actor.stage(NoteSaved(note_id="n", text="boundary"))
        assert await store.last_seq(STREAM) == 3
        assert actor.state == (("n", "boundary"),)


async def test_persist_appends_staged_events_first_in_one_append(
    store: InMemoryEventStore,
) -> None:
    flaky = FlakyStore(store)
    async with ActorSystem() as system:
        actor = NotesActor(flaky)
        await system.spawn(actor, name="notes")
        await actor.ref.ask("get", timeout=5)
        await actor.stage(LLMText(text="a"))
        recorded = await actor.persist([NoteSaved(note_id="n", text="t")])
        assert [r.seq for r in recorded] == [2]
        assert flaky.appends == 1
        assert [r.type for r in await store.read(STREAM)] == ["llm.text", "note.saved"]


async def test_streaming_flushes_what_waits_during_a_pause(store: InMemoryEventStore) -> None:
    class Ticking(NotesActor):
        flush_interval = 0.005

    async with ActorSystem() as system:
        actor = Ticking(store)
        await system.spawn(actor, name="notes")
        await actor.ref.ask("get", timeout=5)
        async with actor.streaming():
            await actor.stage(LLMText(text="first"))
            # The stream pauses here; the ticker flushes, and a subscriber sees it.
            with anyio.fail_after(5):
                async with aclosing(store.subscribe(STREAM)) as live:  # type: ignore[type-var]
                    assert (await anext(live)).event == LLMText(text="first")
            await actor.stage(LLMText(text="second"))
        assert await store.last_seq(STREAM) == 2


async def test_streaming_raises_a_flush_failure(store: InMemoryEventStore) -> None:
    flaky = FlakyStore(store)
    async with ActorSystem() as system:
        actor = NotesActor(flaky)
        await system.spawn(actor, name="notes")
        await actor.ref.ask("get", timeout=5)
        flaky.failing = True
        with pytest.raises(OSError, match="disk full"):
            async with actor.streaming():
                await actor.stage(LLMText(text="lost"))
                await anyio.sleep_forever()  # cancelled by the failed ticker flush


async def test_streaming_lets_the_body_error_through_unwrapped(
    store: InMemoryEventStore,
) -> None:
    async with ActorSystem() as system:
        actor = NotesActor(store)
        await system.spawn(actor, name="notes")
        await actor.ref.ask("get", timeout=5)
        with pytest.raises(KeyError, match="body"):
            async with actor.streaming():
                raise KeyError("body")
