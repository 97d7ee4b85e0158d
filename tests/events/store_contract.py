"""The one contract every event store passes; subclassed per backend."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from events.envelope import NewEvent, Recorded
from events.errors import ConcurrencyError
from events.store import EventStore
from events.types import (
    LLMText,
    RunStarted,
    SessionCreated,
    ToolCompleted,
    UserMessage,
)

pytestmark = pytest.mark.anyio


def texts(records: list[Recorded]) -> list[str]:
    return [r.event.text for r in records]  # type: ignore[attr-defined]


def chunk(i: int) -> LLMText:
    return LLMText(text=f"chunk {i}")


async def fresh_read(contract: Any, stream: str, *, after: int) -> list[Recorded]:
    """What a store that has never seen ``stream`` reads of it."""
    async with contract.open_store(reopen=True) as store:
        result: list[Recorded] = await store.read(stream, after_seq=after)
        return result


class StoreContract:
    """Subclasses provide ``open_store``: an async context manager yielding an open store
    over fresh, empty storage (and, called again with ``reopen=True``, over the same one)."""

    @asynccontextmanager
    async def open_store(self, *, reopen: bool = False, **kw: Any) -> AsyncIterator[EventStore]:
        raise NotImplementedError
        yield

    # ------------------------------------------------------------------ append / read

    async def test_append_numbers_events_from_one(self) -> None:
        async with self.open_store() as store:
            recorded = await store.append(
                "s1", [SessionCreated(profile_id="p"), UserMessage(text="hi")], expected_seq=0
            )
            assert [r.seq for r in recorded] == [1, 2]
            assert [r.stream_id for r in recorded] == ["s1", "s1"]
            more = await store.append("s1", [UserMessage(text="again")], expected_seq=2)
            assert more[0].seq == 3
            assert await store.last_seq("s1") == 3
            assert await store.last_seq("nope") == 0
            back = await store.read("s1")
            assert back == recorded + more

    async def test_envelope_metadata_round_trips(self) -> None:
        async with self.open_store() as store:
            new = NewEvent(event=RunStarted(profile_id="p"), run_id="run-1", causation_id="ev-0")
            [rec] = await store.append("s", [new], expected_seq=0)
            [back] = await store.read("s")
            assert back.run_id == "run-1" and back.causation_id == "ev-0"
            assert back.event_id == rec.event_id and back.timestamp == rec.timestamp
            assert back.event == RunStarted(profile_id="p")

    async def test_payloads_with_nested_values_round_trip(self) -> None:
        event = ToolCompleted(
            call_id="c1", name="t", output="ünïcode ✓\n", metadata={"a": [1, 2, {"b": None}]}
        )
        async with self.open_store() as store:
            await store.append("s", [event], expected_seq=0)
            assert (await store.read("s"))[0].event == event

    async def test_read_ranges(self) -> None:
        async with self.open_store() as store:
            await store.append("s", [chunk(i) for i in range(1, 11)], expected_seq=0)
            assert texts(await store.read("s", after_seq=7)) == ["chunk 8", "chunk 9", "chunk 10"]
            assert texts(await store.read("s", after_seq=2, to_seq=4)) == ["chunk 3", "chunk 4"]
            assert texts(await store.read("s", after_seq=0, limit=2)) == ["chunk 1", "chunk 2"]
            assert await store.read("s", after_seq=10) == []
            assert await store.read("other") == []

    async def test_global_order_across_streams(self) -> None:
        async with self.open_store() as store:
            await store.append("a", [chunk(1)], expected_seq=0)
            await store.append("b", [chunk(2), chunk(3)], expected_seq=0)
            await store.append("a", [chunk(4)], expected_seq=1)
            everything = await store.read_all()
            assert texts(everything) == ["chunk 1", "chunk 2", "chunk 3", "chunk 4"]
            positions = [r.position for r in everything]
            assert positions == sorted(positions) and len(set(positions)) == 4
            after = await store.read_all(after_position=positions[1], limit=1)
            assert texts(after) == ["chunk 3"]
            # A reader that has some streams already (an import's) skips them.
            others = await store.read_all(skip_streams={"b"})
            assert texts(others) == ["chunk 1", "chunk 4"]
            assert texts(
                await store.read_all(after_position=positions[0], limit=1, skip_streams=["b"])
            ) == ["chunk 4"]

    async def test_stream_heads(self) -> None:
        async with self.open_store() as store:
            await store.append("a", [chunk(1), chunk(2)], expected_seq=0)
            await store.append("b", [chunk(3)], expected_seq=0)
            heads = await store.stream_heads()
            assert {k: (v.seq, v.event) for k, v in heads.items()} == {
                "a": (2, chunk(2)),
                "b": (1, chunk(3)),
            }

    async def test_empty_append_writes_nothing(self) -> None:
        async with self.open_store() as store:
            assert await store.append("s", [], expected_seq=0) == []
            assert await store.last_seq("s") == 0

    # ------------------------------------------------------------------ concurrency

    async def test_stale_expected_seq_raises_and_writes_nothing(self) -> None:
        async with self.open_store() as store:
            await store.append("s", [chunk(1)], expected_seq=0)
            with pytest.raises(ConcurrencyError) as err:
                await store.append("s", [chunk(2), chunk(3)], expected_seq=0)
            assert err.value.stream_id == "s" and err.value.actual_seq == 1
            assert "'s'" in str(err.value)
            with pytest.raises(ConcurrencyError):
                await store.append("s", [chunk(2)], expected_seq=5)
            assert texts(await store.read("s")) == ["chunk 1"]

    async def test_racing_writers_on_one_stream_never_interleave(self) -> None:
        async with self.open_store() as store:
            outcomes: list[str] = []

            async def writer(name: str) -> None:
                try:
                    await store.append(
                        "s", [LLMText(text=f"{name}-{i}") for i in range(5)], expected_seq=0
                    )
                    outcomes.append(name)
                except ConcurrencyError:
                    outcomes.append("conflict")

            async with anyio.create_task_group() as tg:
                for n in range(6):
                    tg.start_soon(writer, f"w{n}")
            winners = [o for o in outcomes if o != "conflict"]
            assert len(winners) == 1 and outcomes.count("conflict") == 5
            assert texts(await store.read("s")) == [f"{winners[0]}-{i}" for i in range(5)]

    async def test_a_failed_append_leaves_nothing_behind(self) -> None:
        async with self.open_store() as store:
            bad = ToolCompleted(call_id="c", name="t", output="", metadata={"x": object()})
            with pytest.raises(TypeError):
                await store.append("s", [chunk(1), bad], expected_seq=0)
            assert await store.read("s") == []
            # The store goes on working, and the other appends of the same batch survive.
            results: list[Any] = []

            async def good(stream: str) -> None:
                results.append(await store.append(stream, [chunk(9)], expected_seq=0))

            async def failing() -> None:
                with pytest.raises(TypeError):
                    await store.append("bad", [bad], expected_seq=0)

            async with anyio.create_task_group() as tg:
                tg.start_soon(good, "x")
                tg.start_soon(failing)
                tg.start_soon(good, "y")
            assert len(results) == 2
            assert await store.last_seq("bad") == 0
            assert texts(await store.read("x")) == ["chunk 9"]

    async def test_concurrent_appends_are_group_committed(self) -> None:
        async with self.open_store() as store:
            before = store.commit_count

            async def one(i: int) -> None:
                await store.append(f"s{i}", [chunk(i)], expected_seq=0)

            async with anyio.create_task_group() as tg:
                for i in range(50):
                    tg.start_soon(one, i)
            assert store.commit_count - before < 50
            assert len(await store.read_all()) == 50

    # ------------------------------------------------------------------ idempotency

    async def test_idempotency_key_makes_a_retry_a_no_op(self) -> None:
        async with self.open_store() as store:
            first = await store.append(
                "s", [chunk(1), chunk(2)], expected_seq=0, idempotency_key="k1"
            )
            again = await store.append(
                "s", [chunk(1), chunk(2)], expected_seq=0, idempotency_key="k1"
            )
            assert again == first
            assert await store.last_seq("s") == 2
            # Another key is a new append with the usual check.
            await store.append("s", [chunk(3)], expected_seq=2, idempotency_key="k2")
            assert texts(await store.read("s")) == ["chunk 1", "chunk 2", "chunk 3"]
            # Keys are per stream.
            await store.append("t", [chunk(4)], expected_seq=0, idempotency_key="k1")
            assert await store.last_seq("t") == 1

    # ------------------------------------------------------------------ rewrite (upgrades)

    async def test_a_rewritten_stream_moves_to_the_end_of_the_log(self) -> None:
        async with self.open_store() as store:
            await store.append("f", [chunk(1), chunk(3)], expected_seq=0)
            await store.append("f", [chunk(4)], expected_seq=2, idempotency_key="k")
            await store.append("other", [chunk(9)], expected_seq=0)
            old = await store.read("f")
            inserted = NewEvent(event=chunk(2), event_id="copied", timestamp=5.0)
            kept = [
                NewEvent(event=r.event, event_id=r.event_id, timestamp=r.timestamp) for r in old
            ]
            with pytest.raises(ConcurrencyError):  # another writer came first
                await store.rewrite_stream("f", [kept[0], inserted, *kept[1:]], expected_seq=2)
            await store.rewrite_stream(
                "f", [kept[0], inserted, *kept[1:]], expected_seq=3, keys_after=1, keys_moved_by=1
            )
            new = await store.read("f")
            assert texts(new) == ["chunk 1", "chunk 2", "chunk 3", "chunk 4"]
            assert [r.seq for r in new] == [1, 2, 3, 4]
            assert [r.event_id for r in new] == [
                old[0].event_id,
                "copied",
                *(r.event_id for r in old[1:]),
            ]
            assert new[1].timestamp == 5.0
            other = (await store.read("other"))[0].position
            assert other < new[0].position < new[1].position < new[2].position < new[3].position
            everything = await store.read_all()
            assert [r.stream_id for r in everything] == ["other", "f", "f", "f", "f"]
            # The idempotency key moved with its event: a retry answers with seq 4.
            again = await store.append("f", [chunk(4)], expected_seq=2, idempotency_key="k")
            assert [r.seq for r in again] == [4]
            await store.append("f", [chunk(5)], expected_seq=4)

    # ------------------------------------------------------------------ subscribe

    async def test_subscribe_catches_up_then_follows_live(self) -> None:
        async with self.open_store() as store:
            await store.append("s", [chunk(1), chunk(2)], expected_seq=0)
            seen: list[str] = []

            async def follow() -> None:
                async for rec in store.subscribe("s", after_seq=1):
                    seen.append(rec.event.text)  # type: ignore[attr-defined]
                    if len(seen) == 3:
                        return

            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(follow)
                    await anyio.sleep(0.01)
                    await store.append("s", [chunk(3)], expected_seq=2)
                    await store.append("other", [chunk(99)], expected_seq=0)
                    await store.append("s", [chunk(4)], expected_seq=3)
            assert seen == ["chunk 2", "chunk 3", "chunk 4"]

    async def test_batches_of_a_subscription_are_its_commits(self) -> None:
        async with self.open_store() as store:
            await store.append("s", [chunk(1), chunk(2), chunk(3)], expected_seq=0)
            seen: list[list[str]] = []

            async def follow() -> None:
                async for batch in store.subscribe_batches("s", after_seq=1):
                    seen.append(texts(batch))
                    if batch[-1].seq == 5:
                        return

            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(follow)
                    await anyio.sleep(0.01)
                    await store.append("s", [chunk(4), chunk(5)], expected_seq=3)
            assert seen == [["chunk 2", "chunk 3"], ["chunk 4", "chunk 5"]]

    async def test_a_follower_waiting_for_certain_events_is_woken_only_by_them(self) -> None:
        async with self.open_store() as store:
            await store.append("s", [chunk(1)], expected_seq=0)
            seen: list[list[str]] = []

            async def follow() -> None:
                batches = store.subscribe_batches("s", wake_on=frozenset({"run.started"}))
                async with aclosing(batches):
                    async for batch in batches:
                        seen.append([r.type for r in batch])
                        if batch[-1].type == "run.started":
                            return

            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(follow)
                    await anyio.sleep(0.01)
                    await store.append("s", [chunk(2)], expected_seq=1)
                    await anyio.sleep(0.01)
                    assert seen == [["llm.text"]]  # the catch-up; chunk 2 woke nobody
                    await store.append("s", [chunk(3), RunStarted(profile_id="p")], expected_seq=2)
            assert seen == [["llm.text"], ["llm.text", "llm.text", "run.started"]]
            # A follower that found what it waited for in the catch-up leaves no waiter.
            batches = store.subscribe_batches("s", wake_on=frozenset({"run.started"}))
            async with aclosing(batches):
                async for _ in batches:
                    break
            assert store.notifier._tagged == {}

    async def test_subscribe_has_no_gap_and_no_duplicate_under_racing_appends(self) -> None:
        total = 600
        async with self.open_store() as store:
            await store.append("s", [chunk(i) for i in range(1, 51)], expected_seq=0)
            got: dict[int, list[int]] = {}

            async def subscriber(n: int, after: int) -> None:
                seqs = got.setdefault(n, [])
                async for rec in store.subscribe("s", after_seq=after):
                    seqs.append(rec.seq)
                    if rec.seq == total:
                        return

            async def writer() -> None:
                seq = 50
                sizes = itertools.cycle([1, 7, 3, 20, 1])
                while seq < total:
                    n = min(next(sizes), total - seq)
                    await store.append(
                        "s", [chunk(seq + i + 1) for i in range(n)], expected_seq=seq
                    )
                    seq += n
                    await anyio.lowlevel.checkpoint()

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(writer)
                    for n, after in enumerate([0, 10, 50, 0, 25]):
                        tg.start_soon(subscriber, n, after)
                        await anyio.lowlevel.checkpoint()
            for n, after in enumerate([0, 10, 50, 0, 25]):
                assert got[n] == list(range(after + 1, total + 1))

    async def test_a_subscriber_never_sees_a_failed_append(self) -> None:
        async with self.open_store() as store:
            seen: list[int] = []

            async def follow() -> None:
                async for rec in store.subscribe("s"):
                    seen.append(rec.seq)
                    if rec.event == chunk(2):
                        return

            bad = ToolCompleted(call_id="c", name="t", output="", metadata={"x": object()})
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(follow)
                    await store.append("s", [chunk(1)], expected_seq=0)
                    with pytest.raises(TypeError):
                        await store.append("s", [bad], expected_seq=1)
                    await store.append("s", [chunk(2)], expected_seq=1)
            assert seen == [1, 2]
            assert [r.event for r in await store.read("s")] == [chunk(1), chunk(2)]


class DurableStoreContract(StoreContract):
    """What only stores that outlive their process promise."""

    async def test_events_survive_a_reopen(self) -> None:
        async with self.open_store() as store:
            await store.append("s", [SessionCreated(profile_id="p"), chunk(1)], expected_seq=0)
            await store.append("s", [chunk(2)], expected_seq=2, idempotency_key="k")
        async with self.open_store(reopen=True) as store:
            assert [r.seq for r in await store.read("s")] == [1, 2, 3]
            again = await store.append("s", [chunk(2)], expected_seq=2, idempotency_key="k")
            assert [r.seq for r in again] == [3]
            with pytest.raises(ConcurrencyError):
                await store.append("s", [chunk(3)], expected_seq=2)
            next_one = await store.append("s", [chunk(3)], expected_seq=3)
            assert next_one[0].position > again[0].position

    async def test_every_range_reads_the_same_from_cache_and_from_the_log(self) -> None:
        """A range is answered from the cache of the store that wrote it and from the
        log by a store that never saw it (SQLite reads it page by page): the same
        events either way, including ranges that cross a page or end past the head."""
        total = 1234
        async with self.open_store() as writer:
            for start in range(0, total, 200):
                batch = [chunk(i) for i in range(start + 1, min(start + 200, total) + 1)]
                await writer.append("s", batch, expected_seq=start)
            async with self.open_store(reopen=True) as fresh:
                for after, to, limit in itertools.product(
                    (0, 1, 499, 500, 501, 1200, total),
                    (None, 1, 500, 1001, total + 5),
                    (None, 0, 1, 500, 700),
                ):
                    want = [f"chunk {i}" for i in range(after + 1, total + 1)]
                    if to is not None:
                        want = want[: max(0, to - after)]
                    if limit is not None:
                        want = want[:limit]
                    for store in (writer, fresh):
                        got = await store.read("s", after_seq=after, to_seq=to, limit=limit)
                        assert texts(got) == want, (after, to, limit)
                        assert [r.seq for r in got] == [int(t.split()[1]) for t in want]
            assert texts(await fresh_read(self, "s", after=1230)) == [
                "chunk 1231",
                "chunk 1232",
                "chunk 1233",
                "chunk 1234",
            ]

    async def test_two_stores_on_one_storage_take_turns(self) -> None:
        """Two writers (two processes, say) on the same storage, each sometimes writing
        a stream the other wrote last, in batches large enough to be planned ahead:
        every append lands at the head the log really has, positions stay unique."""
        async with self.open_store() as first, self.open_store(reopen=True) as second:
            seqs = {"a": 0, "b": 0}
            for turn in range(6):
                for store, stream in ((first, "a"), (second, "a"), (second, "b"), (first, "b")):
                    size = 100 + turn
                    got = await store.append(
                        stream, [chunk(i) for i in range(size)], expected_seq=seqs[stream]
                    )
                    assert [r.seq for r in got] == list(
                        range(seqs[stream] + 1, seqs[stream] + size + 1)
                    )
                    seqs[stream] += size
                with pytest.raises(ConcurrencyError):
                    await first.append("a", [chunk(0)] * 100, expected_seq=seqs["a"] - 1)
            everything = await first.read_all()
            positions = [r.position for r in everything]
            assert positions == sorted(set(positions))
            assert len(everything) == sum(seqs.values())
            for stream in seqs:
                assert [r.seq for r in await second.read(stream, after_seq=0, limit=10**6)] == list(
                    range(1, seqs[stream] + 1)
                )

    async def test_queued_appends_land_after_another_writers_rows(self) -> None:
        """One store has several appends queued while another store writes to the same
        storage: every append still lands after what the log really holds."""
        async with self.open_store() as first, self.open_store(reopen=True) as second:
            await first.append("a", [chunk(0)] * 100, expected_seq=0)
            await second.append("b", [chunk(0)] * 100, expected_seq=0)

            async def append_a(i: int) -> None:
                await first.append(f"a{i}", [chunk(i)] * 100, expected_seq=0)

            async with anyio.create_task_group() as tg:
                for i in range(5):
                    tg.start_soon(append_a, i)
                await second.append("b", [chunk(1)] * 100, expected_seq=100)
            everything = await second.read_all()
            assert len({r.position for r in everything}) == len(everything) == 800
            for i in range(5):
                assert [r.seq for r in await second.read(f"a{i}")] == list(range(1, 101))

    async def insert_raw(
        self, store: EventStore, stream: str, seq: int, type_: str, version: int, payload: bytes
    ) -> None:
        from sqlalchemy import func, select

        from events.schema import events_table
        from events.sql import SqlEventStore

        assert isinstance(store, SqlEventStore)
        async with store.engine.begin() as conn:
            position = await conn.scalar(
                select(func.coalesce(func.max(events_table.c.position), 0))
            )
            await conn.execute(
                events_table.insert().values(
                    position=position + 1,
                    stream_id=stream,
                    seq=seq,
                    event_id=f"raw-{seq}",
                    type=type_,
                    version=version,
                    timestamp=0.0,
                    payload=payload,
                )
            )

    async def test_a_corrupt_payload_names_its_stream_and_seq(self) -> None:
        from events.errors import EventDecodeError

        async with self.open_store() as store:
            await store.append("s", [chunk(1)], expected_seq=0)
            await self.insert_raw(store, "s", 2, "llm.text", 1, b'{"type": "llm.text", "tex')
        # Read by another process (this one's cache knows only what it wrote itself).
        async with self.open_store(reopen=True) as store:
            with pytest.raises(EventDecodeError) as err:
                await store.read("s")
            assert (err.value.stream_id, err.value.seq) == ("s", 2)
            assert "'s'#2" in str(err.value)

    async def test_an_unknown_event_type_names_its_stream_and_seq(self) -> None:
        from events.errors import EventDecodeError

        async with self.open_store() as store:
            await self.insert_raw(store, "s", 1, "martian.landed", 1, b'{"type":"martian.landed"}')
            with pytest.raises(EventDecodeError, match=r"unknown event type 'martian\.landed'"):
                await store.read("s")

    async def test_readers_of_the_whole_log_get_an_unreadable_row_as_such(self) -> None:
        from events.types import Unreadable

        async with self.open_store() as store:
            await store.append("good", [chunk(1)], expected_seq=0)
            await self.insert_raw(
                store, "bad", 1, "martian.landed", 1, b'{"type":"martian.landed"}'
            )
            await store.append("good", [chunk(2)], expected_seq=1)
        # One bad row stops no reader of the whole log; the stream's own read still fails.
        async with self.open_store(reopen=True) as store:
            records = await store.read_all()
            assert [(r.stream_id, r.seq) for r in records] == [("good", 1), ("bad", 1), ("good", 2)]
            bad = records[1].event
            assert isinstance(bad, Unreadable) and bad.stored_type == "martian.landed"
            assert "unknown event type" in bad.reason
            heads = await store.stream_heads()
            assert isinstance(heads["bad"].event, Unreadable) and heads["good"].seq == 2

    async def test_old_schema_versions_are_upcast_on_read(self) -> None:
        async with self.open_store() as store:
            v1 = (
                b'{"type": "user.message", "content": "from the original Navi", "images": ["aGk="]}'
            )
            await self.insert_raw(store, "s", 1, "user.message", 1, v1)
            [rec] = await store.read("s")
            assert rec.event == UserMessage(text="from the original Navi", images=("aGk=",))

    async def test_a_v1_database_is_upgraded_and_still_read(self) -> None:
        """Schema v1 stored payloads with their type tag; v2 stores them without. A v1
        database opens as v2 and reads its old rows; new rows are stored without the tag."""
        from sqlalchemy import select, update

        from events.schema import SCHEMA_VERSION, events_table, schema_version_table

        async with self.open_store() as store:
            await self.insert_raw(store, "s", 1, "llm.text", 1, b'{"type":"llm.text","text":"v1"}')
            async with store.engine.begin() as conn:  # type: ignore[attr-defined]
                await conn.execute(update(schema_version_table).values(version=1))
        async with self.open_store(reopen=True) as store:
            await store.append("s", [chunk(2)], expected_seq=1)
            assert [r.event for r in await store.read("s")] == [LLMText(text="v1"), chunk(2)]
            async with store.engine.connect() as conn:  # type: ignore[attr-defined]
                assert await conn.scalar(select(schema_version_table.c.version)) == SCHEMA_VERSION
                stored = await conn.scalar(
                    select(events_table.c.payload).where(events_table.c.seq == 2)
                )
            assert not bytes(stored).startswith(b'{"type"')
