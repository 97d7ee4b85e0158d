from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from events.errors import ConcurrencyError
from events.memory import InMemoryEventStore
from events.types import LLMCompleted, LLMText, ToolCompleted
from events.writer import StreamWriter, WriterFailedError


async def test_chunks_wait_for_a_boundary_and_commit_together() -> None:
    async with InMemoryEventStore() as store:
        writer = StreamWriter(store, "s", last_seq=0, max_delay=60)
        for i in range(10):
            await writer.stage(LLMText(text=str(i)))
        assert await store.last_seq("s") == 0  # nothing durable yet: still staged
        recorded = await writer.append(LLMCompleted(content="0123456789"))
        assert [r.seq for r in recorded] == [11]
        assert await store.last_seq("s") == 11
        assert store.commit_count == 1


async def test_decisions_appended_while_batches_are_on_their_way_keep_their_order() -> None:
    """An append with nothing before it goes straight to the store; one that finds
    batches still on their way (or being sent) waits its turn behind them."""
    async with InMemoryEventStore() as store:
        writer = StreamWriter(store, "s", last_seq=0, max_batch=2, max_delay=60)
        first = await writer.append(ToolCompleted(call_id="c", name="t", output="a"))
        assert [r.seq for r in first] == [1] and store.commit_count == 1
        for i in range(5):  # two batches sent (not yet committed), one chunk staged
            writer.stage_nowait(LLMText(text=str(i)))
            await writer.send_if_due()
        decided = await writer.append(LLMCompleted(content="01234"))
        assert [r.seq for r in decided] == [7]
        stored = await store.read("s")
        assert [r.seq for r in stored] == list(range(1, 8))
        assert [r.event.text for r in stored[1:6]] == list("01234")  # type: ignore[attr-defined]


async def test_a_full_batch_is_sent_without_a_boundary() -> None:
    async with InMemoryEventStore() as store:
        writer = StreamWriter(store, "s", last_seq=0, max_batch=4, max_delay=60)
        for i in range(9):
            await writer.stage(LLMText(text=str(i)))
        await anyio.sleep(0.05)
        assert await store.last_seq("s") == 8  # two full batches went; one event waits
        await writer.commit()
        assert [r.seq for r in await store.read("s")] == list(range(1, 10))


async def test_staged_chunks_are_flushed_after_the_delay_while_ticking() -> None:
    async with InMemoryEventStore() as store:
        writer = StreamWriter(store, "s", last_seq=0, max_delay=0.01)
        async with writer.ticking():
            await writer.stage(LLMText(text="a"))
            with anyio.fail_after(5):
                async for rec in store.subscribe("s"):
                    assert rec.seq == 1
                    break


async def until_durable(store: InMemoryEventStore, seq: int) -> None:
    with anyio.fail_after(5):
        while await store.last_seq("s") < seq:
            await anyio.sleep(0.002)


async def test_the_ticker_is_a_timer_that_ends_with_its_block() -> None:
    async with InMemoryEventStore() as store:
        writer = StreamWriter(store, "s", last_seq=0, max_delay=0.01)
        tasks = len(asyncio.all_tasks())
        async with writer.ticking():
            assert len(asyncio.all_tasks()) == tasks  # no task of its own
            writer.stage_nowait(LLMText(text="a"))  # no stage call will send it
            await until_durable(store, 1)
        writer.stage_nowait(LLMText(text="b"))
        await anyio.sleep(0.05)
        assert await store.last_seq("s") == 1  # no tick after the block
        await writer.commit()
        assert await store.last_seq("s") == 2


async def test_a_tick_leaves_the_batch_to_a_sender_at_work_and_sends_it_later() -> None:
    async with InMemoryEventStore() as store:
        writer = StreamWriter(store, "s", last_seq=0, max_delay=0.01)
        async with writer.ticking():
            async with writer._sending:  # as while the stager sends
                writer.stage_nowait(LLMText(text="a"))
                await anyio.sleep(0.05)
                assert await store.last_seq("s") == 0
            await until_durable(store, 1)


async def test_ticks_go_on_flushing_pause_after_pause() -> None:
    """A stream that pauses many times between two of the stager's sends: the batches
    the ticks sent are committed but not yet handed out, and must not block the next."""
    async with InMemoryEventStore() as store:
        writer = StreamWriter(store, "s", last_seq=0, max_delay=0.01, max_in_flight=2)
        async with writer.ticking():
            for seq in range(1, 6):
                writer.stage_nowait(LLMText(text=str(seq)))
                await until_durable(store, seq)
        records = await writer.append(LLMCompleted(content="12345"))
        assert [r.seq for r in records] == [6]


async def test_after_a_refused_batch_the_ticks_send_nothing_more() -> None:
    async with InMemoryEventStore() as store:
        await store.append("s", [LLMText(text="someone else")], expected_seq=0)
        writer = StreamWriter(store, "s", last_seq=0, max_delay=0.01)
        async with writer.ticking():
            writer.stage_nowait(LLMText(text="a"))  # a tick sends it; the store refuses
            with anyio.fail_after(5):
                while not writer._in_flight:
                    await anyio.sleep(0.002)
            writer.stage_nowait(LLMText(text="b"))
            await anyio.sleep(0.05)
            assert writer._staged  # left for the writer's next call, which fails
        with pytest.raises(WriterFailedError, match="earlier append failed") as failed:
            await writer.commit()
        assert isinstance(failed.value.__cause__, ConcurrencyError)
        assert await store.last_seq("s") == 1


async def test_a_tick_that_must_wait_sends_through_a_task_its_block_waits_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under load (other tasks ready to append) an append leads a gathering turn; a
    tick cannot wait in a callback, so a task of its own sends the batch as the stager
    would, and leaving the block waits for that task."""
    async with InMemoryEventStore() as store:
        assert store.commits_now
        monkeypatch.setattr(store, "_gathers", lambda lone: True)
        writer = StreamWriter(store, "s", last_seq=0, max_delay=0.01)
        send_for_tick = writer._send_for_tick
        started = anyio.Event()
        release = anyio.Event()

        async def held() -> None:
            started.set()
            await release.wait()
            await send_for_tick()

        monkeypatch.setattr(writer, "_send_for_tick", held)

        async def release_soon() -> None:
            await started.wait()
            await anyio.sleep(0.05)
            release.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(release_soon)
            async with writer.ticking():
                writer.stage_nowait(LLMText(text="a"))
                with anyio.fail_after(5):
                    await started.wait()
                left_at = anyio.current_time()
            # The block's exit waited for the held send: the batch is durable now.
            assert anyio.current_time() - left_at >= 0.04
            assert writer._tick_send is None and not writer._staged
            assert await store.last_seq("s") == 1


async def test_a_tick_that_cannot_hand_its_batch_over_fails_the_writer() -> None:
    async with InMemoryEventStore() as store:
        writer = StreamWriter(store, "s", last_seq=0, max_delay=0.01)
    async with writer.ticking():  # the store is closed now
        writer.stage_nowait(LLMText(text="a"))
        await anyio.sleep(0.05)
    with pytest.raises(WriterFailedError, match="not open"):
        await writer.stage(LLMText(text="b"))


async def test_an_old_batch_goes_at_the_next_stage() -> None:
    async with InMemoryEventStore() as store:
        writer = StreamWriter(store, "s", last_seq=0, max_delay=0.01)
        await writer.stage(LLMText(text="a"))
        await anyio.sleep(0.02)
        await writer.stage(LLMText(text="b"))
        await anyio.sleep(0.01)
        assert await store.last_seq("s") == 2


async def test_a_writer_that_lost_its_stream_refuses_to_go_on() -> None:
    async with InMemoryEventStore() as store:
        await store.append("s", [LLMText(text="someone else")], expected_seq=0)
        writer = StreamWriter(store, "s", last_seq=0)
        with pytest.raises(ConcurrencyError):
            await writer.append(ToolCompleted(call_id="c", name="t", output="x"))
        with pytest.raises(WriterFailedError, match="recover the stream"):
            await writer.stage(LLMText(text="more"))
        assert len(await store.read("s")) == 1


async def test_a_decision_committed_at_once_enters_no_cancel_scope(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An append that its caller commits without suspending cannot be cancelled half
    way, so it pays for no shield (a cancel scope costs more than the rest of the
    commit's Python); an append that must wait for a turn of the loop is shielded."""
    scopes: list[anyio.CancelScope] = []
    real = anyio.CancelScope

    def counting(**kw: Any) -> anyio.CancelScope:
        scopes.append(real(**kw))
        return scopes[-1]

    async with InMemoryEventStore() as store:
        writer = StreamWriter(store, "s", last_seq=0)
        await anyio.sleep(0.01)  # the store's own tasks have started: no other task is ready
        monkeypatch.setattr(anyio, "CancelScope", counting)
        for i in range(3):
            await writer.append(
                ToolCompleted(call_id=str(i), name="t", output="a"), LLMText(text="b")
            )
        assert scopes == [] and store.commit_count == 3
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.sleep, 0)  # ready to run: the lead gives the loop a turn
            assert store.submit_nowait("s", [LLMText(text="c")], expected_seq=6) is None
            assert store.commit_count == 3  # nothing done
            records = await writer.append(LLMText(text="c"))
        assert len(scopes) == 2 and [r.seq for r in records] == [7]  # the writer's and the lead's
    assert [r.seq for r in await store.read("s")] == list(range(1, 8))


async def test_a_cancelled_caller_still_submits_what_it_staged() -> None:
    """Once counted in the writer's seqs, a batch reaches the store even if its caller
    is cancelled on the way (with or without a gathering turn)."""
    async with InMemoryEventStore() as store:
        writer = StreamWriter(store, "s", last_seq=0)
        for ready in (False, True):
            async with anyio.create_task_group() as tg:
                if ready:
                    tg.start_soon(anyio.sleep, 0)
                with anyio.CancelScope() as scope:
                    scope.cancel()
                    await writer.append(LLMText(text=str(ready)))
        assert writer.last_seq == 2
        await writer.commit()
        assert [r.seq for r in await store.read("s")] == [1, 2]
