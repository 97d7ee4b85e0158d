"""A failed LLM call is retried as another attempt of its iteration; once an attempt
answers, the run goes on with the next iteration."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from events.envelope import Recorded
from events.types import LLMCompleted, LLMFailed, LLMRequested, RunStarted, ToolCall
from navi.run import progress
from tests.support.fake_llm import FakeLLMServer, FakeToolCall, Reply
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
    assert p.failures == 0 and p.last_completion is not None


async def test_after_a_retried_call_the_next_call_is_a_new_iteration(tmp_path: Path) -> None:
    read = FakeToolCall(name="todo", arguments={"action": "read"})
    replies = [
        Reply(error_before="overloaded", error_status=503),
        Reply(tool_calls=[read]),
        Reply(text="Done."),
    ]
    async with (
        FakeLLMServer(replies) as fake,
        open_navi(navi_settings(tmp_path, fake.url, planning="off")) as navi,
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
