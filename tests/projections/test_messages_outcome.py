"""The history shows what the page showed live (issue 23): how a run ended (stopped,
failed with its error, a completed run's figures), how long the model thought, and the
partial answer a retry superseded when no later attempt said anything."""

from __future__ import annotations

import msgspec

from events.types import (
    Event,
    LLMCompleted,
    LLMFailed,
    LLMRequested,
    LLMText,
    LLMThinking,
    LLMToolCalls,
    PlanReady,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunStopped,
    SessionCreated,
    StopRequested,
    ToolCall,
    ToolCompleted,
    ToolFailed,
    ToolRequested,
    UserMessage,
)
from navi.server.frames import FrameTranslator
from projections.fold import fold
from projections.messages import MESSAGES, MessagesState
from tests.projections.logs import records
from tests.support.frames import wire

CALL = ToolCall(id="c1", name="web_search", arguments={"query": "navi"})


def messages_of(events: list[Event]) -> MessagesState:
    return fold(MESSAGES, records([SessionCreated(profile_id="p"), *events]))


def test_a_completed_run_carries_the_figures_its_stream_end_showed() -> None:
    events: list[Event] = [
        UserMessage(text="q"),  # seq 2
        RunStarted(profile_id="p"),  # seq 3, t0 + 3
        LLMRequested(purpose="plan"),
        LLMCompleted(content="DIRECT", completion_tokens=4),  # a planning call counts too
        LLMRequested(),
        LLMCompleted(tool_calls=(CALL,), completion_tokens=7),
        ToolRequested(call_id="c1", name="web_search"),
        ToolCompleted(call_id="c1", name="web_search", output="found"),
        LLMRequested(),
        LLMCompleted(content="Done.", completion_tokens=11),
        RunCompleted(content="Done."),  # seq 12, t0 + 12
    ]
    log = records([SessionCreated(profile_id="p"), *events])
    answer = fold(MESSAGES, log).messages()[-1]
    assert (answer.content, answer.elapsed_seconds) == ("Done.", 9.0)
    assert (answer.tool_call_count, answer.token_count) == (1, 22)
    assert not answer.stopped and answer.error is None

    frames = FrameTranslator(max_context_tokens=100)
    end = [f for r in log for f in wire(frames.frames(r)) if f["type"] == "stream_end"][-1]
    assert (end["elapsed_seconds"], end["tool_call_count"], end["token_count"]) == (
        answer.elapsed_seconds,
        answer.tool_call_count,
        answer.token_count,
    )
    assert end["message_index"] == len(fold(MESSAGES, log).messages()) - 1


def test_a_stopped_answer_says_stopped() -> None:
    final = messages_of(
        [
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            LLMRequested(),
            LLMText(text="Once upon"),
            StopRequested(),
            RunStopped(),
        ]
    )
    partial = final.messages()[-1]
    assert (partial.content, partial.stopped) == ("Once upon", True)
    assert partial.elapsed_seconds is None  # live, a stopped run shows no figures


def test_a_stop_during_a_tool_gets_a_message_that_says_so() -> None:
    final = messages_of(
        [
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            LLMRequested(),
            LLMCompleted(tool_calls=(CALL,)),
            ToolRequested(call_id="c1", name="web_search"),
            StopRequested(),
            ToolFailed(call_id="c1", name="web_search", reason="stopped"),
            RunStopped(),
        ]
    )
    assert [(m.role, m.stopped) for m in final.messages()] == [
        ("user", False),
        ("assistant", False),
        ("tool", False),
        ("assistant", True),
    ]


def test_a_partial_answer_a_failed_retry_superseded_stays_with_the_error() -> None:
    final = messages_of(
        [
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            LLMRequested(attempt=1, max_attempts=3),
            LLMText(text="The first half"),  # seq 5
            LLMFailed(error="connection reset", retryable=True),
            LLMRequested(attempt=2, max_attempts=3),
            LLMFailed(error="connection refused", retryable=True),
            LLMRequested(attempt=3, max_attempts=3),
            LLMFailed(error="connection refused", retryable=True),
            RunFailed(error="The LLM server is unreachable"),
        ]
    )
    _user, partial = final.messages()
    assert (partial.content, partial.seq) == ("The first half", 5)
    assert partial.error == "The LLM server is unreachable"


def test_a_retry_that_answers_replaces_the_superseded_partial() -> None:
    final = messages_of(
        [
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            LLMRequested(attempt=1),
            LLMText(text="The first half"),
            LLMFailed(error="reset", retryable=True),
            LLMRequested(attempt=2),
            LLMText(text="Whole"),
            LLMFailed(error="reset", retryable=True),  # a second partial supersedes it
            LLMRequested(attempt=3),
            LLMToolCalls(calls=(CALL,)),  # the next attempt answers: nothing partial left
            RunFailed(error="boom"),
        ]
    )
    assert [(m.content, m.error) for m in final.messages()] == [("q", None), ("", "boom")]


def test_thinking_seconds_run_from_the_first_thinking_chunk_to_what_ended_it() -> None:
    final = messages_of(
        [
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            LLMRequested(),
            LLMThinking(text="hmm"),  # t0 + 5
            LLMThinking(text=" yes"),
            LLMText(text="Hi"),  # t0 + 7: thinking ended
            LLMCompleted(content="Hi", thinking="hmm yes"),
            RunCompleted(content="Hi"),
        ]
    )
    assert final.messages()[-1].thinking_seconds == 2.0
    plain = messages_of(
        [UserMessage(text="q"), RunStarted(profile_id="p"), LLMRequested(), LLMText(text="a")]
    )
    assert plain.messages()[-1].thinking_seconds is None


def test_a_plan_never_carries_the_run_end_and_old_clients_see_known_fields() -> None:
    final = messages_of(
        [
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            PlanReady(plan="1. a"),
            RunCompleted(content="I stopped after 1 steps", completed_normally=False),
        ]
    )
    plan, end = final.messages()[1:]
    assert plan.is_plan and plan.elapsed_seconds is None
    encoded = msgspec.json.decode(msgspec.json.encode(end))
    assert encoded["role"] == "assistant" and encoded["content"] == "I stopped after 1 steps"
    assert {"stopped", "error", "thinking_seconds"}.isdisjoint(encoded)  # defaults are left out


def test_failed_attempts_become_llm_failed_frames_saying_whether_a_retry_follows() -> None:
    log = records(
        [
            SessionCreated(profile_id="p"),
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            LLMRequested(attempt=1, max_attempts=2),
            LLMFailed(error="reset", retryable=True),
            LLMRequested(attempt=2, max_attempts=2),
            LLMFailed(error="refused", retryable=True),
            RunFailed(error="refused"),
        ]
    )
    frames = FrameTranslator(max_context_tokens=100)
    wanted = ("llm_failed", "stream_retry", "error")
    out = [f for r in log for f in wire(frames.frames(r)) if f["type"] in wanted]
    assert [(f["type"], f.get("attempt"), f.get("retrying")) for f in out] == [
        ("llm_failed", 1, True),
        ("stream_retry", 2, None),
        ("llm_failed", 2, False),
        ("error", None, None),
    ]
    assert out[1]["max_attempts"] == 2 and out[0]["error"] == "reset"
