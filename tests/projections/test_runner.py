from __future__ import annotations

import anyio
import pytest

from events.envelope import Recorded
from events.in_memory import InMemoryEventStore
from events.types import (
    Event,
    LLMCompleted,
    LLMRequested,
    LLMText,
    RunCompleted,
    RunStarted,
    SessionCreated,
    UserMessage,
)
from projections import sessions
from projections.context import CONTEXT
from projections.fold import fold
from projections.messages import MESSAGES
from projections.runner import LogProjectionRunner, ProjectionGapError, ProjectionRunner
from projections.sessions import SESSIONS
from tests.projections.logs import records

pytestmark = pytest.mark.anyio


def turn(text: str) -> list[Event]:
    return [
        UserMessage(text=text),
        RunStarted(profile_id="p"),
        LLMRequested(),
        LLMText(text="ok "),
        LLMCompleted(content=f"ok {text}"),
        RunCompleted(),
    ]


async def test_catch_up_then_follow_live() -> None:
    async with InMemoryEventStore() as store:
        first = [SessionCreated(profile_id="p"), *turn("one")]
        await store.append("s1", first, expected_seq=0)
        await store.append("other", [SessionCreated(profile_id="p")], expected_seq=0)
        runner = ProjectionRunner(store, "s1", MESSAGES)
        await runner.catch_up()
        assert runner.seq == 7
        assert [m.content for m in runner.state.messages()] == ["one", "ok one"]

        async with anyio.create_task_group() as tg:
            tg.start_soon(runner.follow)
            await store.append("s1", turn("two"), expected_seq=7)
            with anyio.fail_after(5):
                state = await runner.wait_for(13)
            assert [m.content for m in state.messages()][-2:] == ["two", "ok two"]
            tg.cancel_scope.cancel()
        assert runner.state == fold(MESSAGES, await store.read("s1"))


async def test_follow_until_a_seq_returns() -> None:
    async with InMemoryEventStore() as store:
        await store.append("s1", [SessionCreated(profile_id="p"), *turn("a")], expected_seq=0)
        runner = ProjectionRunner(store, "s1", CONTEXT)
        with anyio.fail_after(5):
            state = await runner.follow(until_seq=4)
            assert runner.seq == 4 and [m.content for m in state.as_list()] == ["a"]
            state = await runner.follow(until_seq=7)
            assert state == fold(CONTEXT, await store.read("s1"))
            assert await runner.follow(until_seq=3) is state  # already there


def test_apply_skips_what_it_has_and_refuses_gaps() -> None:
    log = records([SessionCreated(profile_id="p"), *turn("a")])
    runner = ProjectionRunner(None, "s1", MESSAGES)  # type: ignore[arg-type]
    for record in log[:3]:
        runner.apply(record)
    before = runner.state
    assert runner.apply(log[1]) is before  # already applied: skipped
    with pytest.raises(ProjectionGapError, match="expected seq 4, got seq 6"):
        runner.apply(log[5])
    other = records([SessionCreated(profile_id="p")], stream_id="s2", start_seq=4)[0]
    with pytest.raises(ProjectionGapError, match="stream 's2'"):
        runner.apply(other)
    assert runner.state is before and runner.seq == 3


async def test_log_runner_folds_every_stream() -> None:
    async with InMemoryEventStore() as store:
        await store.append("s1", [SessionCreated(profile_id="p"), *turn("a")], expected_seq=0)
        await store.append("s2", [SessionCreated(profile_id="p", title="Two")], expected_seq=0)
        runner = LogProjectionRunner(store, SESSIONS)
        state = await runner.catch_up(batch=3)
        assert [s.session_id for s in state.listing()] == ["s2", "s1"]
        assert runner.position == 8
        # Live events from per-stream subscriptions may come in any stream order.
        more = await store.append("s1", turn("b"), expected_seq=7)
        extra: Recorded = (await store.append("s2", [UserMessage(text="hi")], expected_seq=1))[0]
        runner.apply(extra)
        for record in more:
            runner.apply(record)
        runner.apply(more[0])  # a repeat is skipped
        assert runner.state == fold(SESSIONS, await store.read_all())
        with pytest.raises(ProjectionGapError):
            runner.apply(records([UserMessage(text="x")], stream_id="s2", start_seq=9)[0])


async def test_log_runner_adopts_new_streams_folded_elsewhere() -> None:
    """A big import's streams, skipped while written, folded on their own and merged:
    the same state as a catch-up that reads them back, and the runner goes on."""
    async with InMemoryEventStore() as store:
        await store.append("s1", [SessionCreated(profile_id="p"), *turn("a")], expected_seq=0)
        runner = LogProjectionRunner(store, SESSIONS)
        await runner.catch_up()
        imported = await store.append(
            "s3", [SessionCreated(profile_id="p", user_id="ann"), *turn("b")], expected_seq=0
        )
        await store.append("s2", [SessionCreated(profile_id="p", title="After")], expected_seq=0)
        await runner.catch_up(skip={"s3"})  # s2, not s3
        assert runner.state.get("s2") is not None and runner.state.get("s3") is None
        runner.adopt(sessions.merged(runner.state, fold(SESSIONS, imported)), imported)
        await store.append("s1", turn("c"), expected_seq=7)
        await store.append("s3", turn("d"), expected_seq=len(imported))
        assert await runner.catch_up() == fold(SESSIONS, await store.read_all())
        assert runner.state.listing_of("ann")[0].session_id == "s3"
        # Records it has applied already are refused.
        with pytest.raises(ProjectionGapError):
            runner.adopt(runner.state, imported)
