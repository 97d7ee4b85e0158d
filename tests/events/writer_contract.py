"""The contract of a stream's writer (events/writer.py), run on every store: mixed into
each store's test class, which provides ``open_store``."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import pytest

from events.errors import ConcurrencyError
from events.store import EventStore
from events.types import LLMCompleted, LLMText, ToolCompleted, ToolStarted
from events.writer import StreamWriter, WriterFailedError

pytestmark = pytest.mark.anyio


def texts(records: list[Any]) -> list[str]:
    return [r.event.text for r in records]


async def until_durable(store: EventStore, stream: str, seq: int) -> None:
    with anyio.fail_after(5):
        while len(await store.read(stream)) < seq:
            await anyio.sleep(0.002)


class WriterContract:
    def open_store(self, **kw: Any) -> AbstractAsyncContextManager[EventStore]:
        raise NotImplementedError

    async def test_chunks_wait_for_a_boundary_and_commit_with_it(self) -> None:
        async with self.open_store() as store:
            writer = StreamWriter(store, "s", last_seq=0, max_delay=60)
            async with writer.running():
                before = store.commit_count
                for i in range(10):
                    assert await writer.stage(LLMText(text=str(i))) == i + 1
                assert await store.read("s") == []  # nothing durable yet: still queued
                recorded = await writer.append(LLMCompleted(content="0123456789"))
                assert [r.seq for r in recorded] == [11]
                assert store.commit_count == before + 1
            assert [r.seq for r in await store.read("s")] == list(range(1, 12))

    async def test_a_boundary_event_is_flushed_without_a_caller_waiting(self) -> None:
        async with self.open_store() as store:
            writer = StreamWriter(store, "s", last_seq=0, max_delay=60)
            async with writer.running():
                await writer.stage(LLMText(text="a"), ToolStarted(call_id="c", name="t"))
                await until_durable(store, "s", 2)

    async def test_a_full_batch_is_flushed_without_a_boundary(self) -> None:
        async with self.open_store() as store:
            writer = StreamWriter(store, "s", last_seq=0, max_batch=4, max_delay=60)
            async with writer.running():
                for i in range(9):
                    await writer.stage(LLMText(text=str(i)))
                await until_durable(store, "s", 8)  # two full batches; one event waits
                await anyio.sleep(0.05)
                assert len(await store.read("s")) == 8
                await writer.commit()
                assert len(await store.read("s")) == 9

    async def test_a_chunk_is_flushed_after_the_delay(self) -> None:
        async with self.open_store() as store:
            writer = StreamWriter(store, "s", last_seq=0, max_delay=0.01)
            async with writer.running():
                await writer.stage(LLMText(text="a"))
                with anyio.fail_after(5):
                    async for record in store.subscribe("s"):
                        assert record.seq == 1
                        break

    async def test_a_subscriber_sees_only_committed_events_in_order(self) -> None:
        async with self.open_store() as store:
            writer = StreamWriter(store, "s", last_seq=0, max_batch=7, max_delay=0.002)
            seen: list[int] = []

            async def follow() -> None:
                async for record in store.subscribe("s"):
                    assert record.seq <= len(await store.read("s"))  # durable
                    seen.append(record.seq)
                    if record.seq == 101:
                        return

            async with anyio.create_task_group() as tg, writer.running():
                tg.start_soon(follow)
                for i in range(100):
                    await writer.stage(LLMText(text=str(i)))
                    if i % 10 == 0:
                        await anyio.sleep(0.001)
                await writer.append(LLMCompleted(content="done"))
            assert seen == list(range(1, 102))

    async def test_appends_keep_their_order_behind_staged_chunks(self) -> None:
        async with self.open_store() as store:
            writer = StreamWriter(store, "s", last_seq=0, max_batch=2, max_delay=60)
            async with writer.running():
                first = await writer.append(ToolCompleted(call_id="c", name="t", output="a"))
                assert [r.seq for r in first] == [1]
                for i in range(5):
                    await writer.stage(LLMText(text=str(i)))
                decided = await writer.append(LLMCompleted(content="01234"), LLMText(text="x"))
                assert [r.seq for r in decided] == [7, 8]
                assert decided[0].event == LLMCompleted(content="01234")
            stored = await store.read("s")
            assert [r.seq for r in stored] == list(range(1, 9))
            assert texts(stored[1:6]) == list("01234")

    async def test_one_append_is_in_flight_and_a_full_queue_makes_the_stager_wait(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async with self.open_store() as store:
            real = store.append
            in_flight = 0
            most = 0
            release = anyio.Event()

            async def slow_append(*args: Any, **kw: Any) -> Any:
                nonlocal in_flight, most
                in_flight += 1
                most = max(most, in_flight)
                await release.wait()
                try:
                    return await real(*args, **kw)
                finally:
                    in_flight -= 1

            monkeypatch.setattr(store, "append", slow_append)
            writer = StreamWriter(store, "s", last_seq=0, max_batch=4, max_delay=0.001, queue=8)
            staged = 0

            async def stage_many() -> None:
                nonlocal staged
                for i in range(40):
                    await writer.stage(LLMText(text=str(i)))
                    staged += 1

            async with writer.running(), anyio.create_task_group() as tg:
                tg.start_soon(stage_many)
                await anyio.sleep(0.05)
                assert staged <= 4 + 8 + 1  # the batch in flight, the queue, one waiting
                release.set()
            assert most == 1
            assert staged == 40
            assert texts(await store.read("s")) == [str(i) for i in range(40)]

    async def test_a_writer_that_lost_its_stream_refuses_to_go_on(self) -> None:
        async with self.open_store() as store:
            await store.append("s", [LLMText(text="someone else")], expected_seq=0)
            writer = StreamWriter(store, "s", last_seq=0)
            async with writer.running():
                await writer.stage(LLMText(text="mine"))
                with pytest.raises(ConcurrencyError):
                    await writer.append(ToolCompleted(call_id="c", name="t", output="x"))
                with pytest.raises(WriterFailedError, match="recover the stream"):
                    await writer.stage(LLMText(text="more"))
            assert texts(await store.read("s")) == ["someone else"]

    async def test_a_cancelled_caller_still_gets_its_events_committed(self) -> None:
        async with self.open_store() as store:
            writer = StreamWriter(store, "s", last_seq=0)
            async with writer.running():
                with anyio.CancelScope() as scope:
                    scope.cancel()
                    await writer.append(LLMText(text="a"))
                assert writer.last_seq == 1
                with anyio.move_on_after(0):
                    await writer.append(LLMText(text="b"))
                records = await writer.append(LLMText(text="c"))
                assert [r.seq for r in records] == [3]
            assert texts(await store.read("s")) == ["a", "b", "c"]

    async def test_chunks_staged_while_an_append_is_in_flight_come_after_it(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # An append with nothing queued goes to the store's queue itself: what is staged
        # meanwhile waits for it, and keeps its seqs.
        async with self.open_store() as store:
            real = store._commit
            release = anyio.Event()

            async def held_commit(batch: Any) -> Any:
                await release.wait()
                return await real(batch)

            monkeypatch.setattr(store, "_commit", held_commit)
            writer = StreamWriter(store, "s", last_seq=0, max_delay=60)
            decided: list[Any] = []

            async def decide() -> None:
                decided.extend(await writer.append(ToolStarted(call_id="c", name="t")))

            async with writer.running(), anyio.create_task_group() as tg:
                tg.start_soon(decide)
                await anyio.sleep(0.01)
                assert await writer.stage(LLMText(text="a")) == 2
                assert await writer.stage(LLMText(text="b")) == 3
                staged_then = anyio.Event()

                async def boundary() -> None:
                    records = await writer.append(LLMCompleted(content="ab"))
                    assert [r.seq for r in records] == [4]
                    staged_then.set()

                tg.start_soon(boundary)
                await anyio.sleep(0.01)
                assert await store.read("s") == []  # the first append is still in flight
                release.set()
                with anyio.fail_after(5):
                    await staged_then.wait()
            assert [r.seq for r in decided] == [1]
            stored = await store.read("s")
            assert [r.seq for r in stored] == [1, 2, 3, 4]
            assert texts(stored[1:3]) == ["a", "b"]

    async def test_an_append_whose_caller_was_cancelled_in_flight_counts(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async with self.open_store() as store:
            real = store._commit
            release = anyio.Event()

            async def held_commit(batch: Any) -> Any:
                await release.wait()
                return await real(batch)

            monkeypatch.setattr(store, "_commit", held_commit)
            writer = StreamWriter(store, "s", last_seq=0)
            async with writer.running():
                with anyio.move_on_after(0.01) as scope:  # gone before the commit
                    await writer.append(LLMText(text="a"))
                assert scope.cancelled_caught
                release.set()
                records = await writer.append(LLMText(text="b"))
                assert [r.seq for r in records] == [2]
            assert texts(await store.read("s")) == ["a", "b"]

    async def test_a_failed_append_whose_caller_was_cancelled_still_stops_the_writer(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async with self.open_store() as store:
            await store.append("s", [LLMText(text="someone else")], expected_seq=0)
            real = store._commit
            release = anyio.Event()

            async def held_commit(batch: Any) -> Any:
                await release.wait()
                return await real(batch)

            monkeypatch.setattr(store, "_commit", held_commit)
            writer = StreamWriter(store, "s", last_seq=0)
            async with writer.running():
                with anyio.move_on_after(0.01) as scope:  # gone before the commit fails
                    await writer.append(ToolCompleted(call_id="c", name="t", output="x"))
                assert scope.cancelled_caught
                release.set()
                with pytest.raises(ConcurrencyError):
                    await writer.append(LLMText(text="next"))
                with pytest.raises(WriterFailedError, match="recover the stream"):
                    await writer.append(LLMText(text="more"))
            assert texts(await store.read("s")) == ["someone else"]

    async def test_closing_commits_what_is_queued(self) -> None:
        async with self.open_store() as store:
            writer = StreamWriter(store, "s", last_seq=0, max_delay=60)
            async with anyio.create_task_group() as tg:
                tg.start_soon(writer.run)
                for i in range(3):
                    await writer.stage(LLMText(text=str(i)))
                await writer.aclose()
            assert texts(await store.read("s")) == ["0", "1", "2"]
            with pytest.raises(WriterFailedError, match="ended"):
                await writer.stage(LLMText(text="late"))
