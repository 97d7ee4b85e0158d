"""A failed LLM call is retried as another attempt of its iteration; once an attempt
answers, the run goes on with the next iteration."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from events.envelope import Recorded
from events.types import (
    ContextInjected,
    LLMCompleted,
    LLMFailed,
    LLMRequested,
    PlanReady,
    PlanStatus,
    RunStarted,
    StopRequested,
    SubagentFinished,
    SubagentSpawned,
    TodoItem,
    TodoUpdated,
    ToolCall,
    ToolCompleted,
    ToolRequested,
    ToolStarted,
)
from navi.run import progress
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import FakeToolCall, Reply
from tests.support.navi_app import navi_settings, open_navi

pytestmark = pytest.mark.anyio


def fold(*events: object) -> progress.RunProgress:
    p = progress.INITIAL
    for seq, event in enumerate(events, 1):
        record = Recorded(
            stream_id="s", seq=seq, position=seq, event_id="", timestamp=0.0, event=event
        )  # type: ignore[arg-type]
        p = progress.evolve(p, record)
    return p


def test_an_answer_ends_the_run_of_failures() -> None:
    call = ToolCall(id="c1", name="todo", arguments={})
    p = fold(
        RunStarted(profile_id="p"),
        LLMRequested(iteration=1, attempt=1),
        LLMFailed(error="overloaded", retryable=True),
        LLMRequested(iteration=1, attempt=2),
    )
    assert (p.iterations, p.attempt, p.failures) == (1, 2, 1)
    p = fold(
        RunStarted(profile_id="p"),
        LLMRequested(iteration=1, attempt=1),
        LLMFailed(error="overloaded", retryable=True),
        LLMRequested(iteration=1, attempt=2),
        LLMCompleted(tool_calls=(call,), finish_reason="tool_calls"),
    )
    assert p.failures == 0 and p.calls == (call,)


async def test_after_a_retried_call_the_next_call_is_a_new_iteration(tmp_path: Path) -> None:
    read = FakeToolCall(name="todo", arguments={"action": "read"})
    replies = [
        Reply(error_before="overloaded", error_status=503),
        Reply(tool_calls=[read]),
        Reply(text="Done."),
    ]
    async with (
        FakeLLM(replies) as fake,
        open_navi(navi_settings(tmp_path, fake.url, planning="off"), llm=fake) as navi,
    ):
        session = await navi.create_session("secretary")
        with anyio.fail_after(20):
            await navi.run(session, "Read the todo list.")
        requested = [
            (r.event.iteration, r.event.attempt)
            for r in await navi.store.read(session)
            if isinstance(r.event, LLMRequested)
        ]
    assert requested == [(1, 1), (1, 2), (2, 1)]


def test_the_progress_folds_each_kind_of_event_of_a_run() -> None:
    spawned = SubagentSpawned(child_stream_id="s.c1", call_id="c1", task="look")
    finished = SubagentFinished(child_stream_id="s.c1", call_id="c1", result="seen")
    failed_step = TodoUpdated(items=(TodoItem(id=1, text="a", status="failed"),))
    events: list[object] = [
        RunStarted(profile_id="p"),
        PlanStatus(phase=2, label="planning"),
        PlanReady(plan="1. look"),
        LLMRequested(iteration=1, attempt=1),
        LLMCompleted(tool_calls=(ToolCall(id="c1", name="spawn_agent", arguments={}),)),
        ToolRequested(call_id="c1", name="spawn_agent", arguments={}, step=1),
        ToolStarted(call_id="c1", name="spawn_agent"),
        spawned,
        finished,
        ToolCompleted(call_id="c1", name="spawn_agent", output="seen"),
        failed_step,
        ContextInjected(kind="replan", content="re-plan"),
        LLMRequested(iteration=2, attempt=1),
        ContextInjected(kind="goal_anchor", content="the goal"),
        ContextInjected(kind="iteration_budget", content="3 left"),
        StopRequested(reason="user"),
    ]
    p = fold(*events)
    assert (p.plan_phase, p.plan_ready, p.iterations) == (2, True, 2)
    assert (p.subagents, p.subagents_finished) == ((spawned,), (finished,))
    assert len(fold(*events[:10]).requested) == 1
    assert (p.failed_steps, p.replanned, p.last_anchor) == (frozenset({1}), 1, 2)
    assert p.llm_open  # stop.requested is the run state's business (stopping), not progress
    assert fold(*events[:10]).resolved == frozenset({"c1"})
    assert fold(*events[:10]).open_calls == []
    failed = fold(*events[:13], LLMFailed(error="down", kind="thinking_not_supported"))
    assert (failed.failures, failed.retryable, failed.think_off) == (1, True, True)


async def test_a_stop_during_the_back_off_ends_the_run_stopped_at_once(tmp_path: Path) -> None:
    """The table sees the stop signal at its next decision: the back-off is cut short
    and the run ends ``run.stopped`` (not ``run.failed``), with no further attempt."""
    replies = [Reply(error_before="overloaded", error_status=503), Reply(text="Too late.")]
    async with FakeLLM(replies) as fake:
        settings_ = navi_settings(tmp_path, fake.url, planning="off", llm_retry_backoff_s=60.0)
        async with open_navi(settings_, llm=fake) as navi:
            session = await navi.create_session("secretary")
            reply = await navi.send(session, "Read the todo list.", mode="run")
            with anyio.fail_after(10):
                while not any(
                    isinstance(r.event, LLMFailed) for r in await navi.store.read(session)
                ):
                    await anyio.sleep(0.01)
                assert await navi.stop(session)
                end = await navi.wait_for_end(session, reply)
            types = [r.type for r in await navi.store.read(session)]
    assert end.type == "run.stopped"
    assert types.count("llm.requested") == 1 and "run.failed" not in types
