from __future__ import annotations

import pytest
from hypothesis import given, settings

from events.envelope import Recorded
from events.types import (
    ContextCompressed,
    ContextInjected,
    Event,
    FileRef,
    LLMCompleted,
    LLMRequested,
    LLMText,
    LLMThinking,
    PlanReady,
    RunCompleted,
    RunStarted,
    RunStopped,
    SessionCreated,
    StopRequested,
    ToolCall,
    ToolCompleted,
    ToolFailed,
    UserMessage,
)
from projections.context import CONTEXT, ContextState, chars_after, estimate_tokens
from projections.fold import fold, fold_until
from projections.messages import MESSAGES
from projections.types import Message
from tests.projections.logs import recorded_logs, records
from tests.support.well_formed import assert_well_formed

A = ToolCall(id="a", name="image_view", arguments={"path": "/cat.png"})
B = ToolCall(id="b", name="web_search")
IMAGE = {"is_image": True, "base64": "Y2F0"}


def context_of(events: list[Event]) -> ContextState:
    return fold(CONTEXT, records([SessionCreated(profile_id="p"), *events]))


def roles(state: ContextState) -> list[str]:
    return [m.role for m in state.as_list()]


def turn(text: str, answer: str) -> list[Event]:
    return [
        UserMessage(text=text),
        RunStarted(profile_id="p"),
        LLMRequested(),
        LLMText(text=answer),
        LLMCompleted(content=answer, prompt_tokens=1000, completion_tokens=20),
        RunCompleted(content=answer),
    ]


def tool_turn(text: str) -> list[Event]:
    return [
        UserMessage(text=text),  # +1
        RunStarted(profile_id="p"),  # +2
        LLMRequested(),  # +3
        LLMCompleted(tool_calls=(A, B)),  # +4
        ToolCompleted(call_id="a", name="image_view", output="an image", metadata=IMAGE),  # +5
        ContextInjected(kind="budget", content="2 left"),  # +6, while b is open
        ToolCompleted(call_id="b", name="web_search", output="found"),  # +7
        LLMRequested(iteration=1),  # +8
        LLMCompleted(content="It is a cat."),  # +9
        RunCompleted(),  # +10
    ]


def test_the_llm_sees_plan_injections_files_and_images() -> None:
    state = context_of(
        [
            UserMessage(
                text="look", images=("aW1n",), files=(FileRef(name="a.pdf", path="/s/a.pdf"),)
            ),
            RunStarted(profile_id="p"),
            LLMRequested(purpose="plan"),
            LLMCompleted(content="1. look"),
            PlanReady(plan="1. look"),
            ContextInjected(kind="goal", role="system", content="Goal: look"),
            *tool_turn("and now?")[2:],
        ]
    )
    messages = state.as_list()
    assert roles(state) == [
        "user", "assistant", "system", "assistant", "tool", "tool", "user", "system", "assistant",
    ]  # fmt: skip
    user, plan, goal, calls, result_a, result_b, image, budget, answer = messages
    assert user.content == "look\n\nAttached files (paths on disk):\n- a.pdf: /s/a.pdf"
    assert user.images == ("aW1n",) and not user.files
    assert plan.is_plan and plan.content == "1. look"
    assert goal.content == "Goal: look"
    assert calls.tool_calls == (A, B)
    assert (result_a.tool_call_id, result_b.tool_call_id) == ("a", "b")
    # The image and the injected message waited until every call had its result.
    assert image.images == ("Y2F0",) and "image_view" in image.content
    assert budget.content == "2 left"
    assert answer.content == "It is a cat."
    assert_well_formed(messages)


def test_thinking_and_partial_chunks_are_not_in_the_context() -> None:
    state = context_of(
        [
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            LLMRequested(),
            LLMThinking(text="hmm"),
            LLMText(text="partial"),
        ]
    )
    assert roles(state) == ["user"]
    done = context_of([*turn("q", "a")])
    assert [m.thinking for m in done.as_list()] == ["", ""]


def test_a_stopped_answer_is_kept_marked_as_cut_short() -> None:
    state = context_of(
        [
            UserMessage(text="tell a story"),
            RunStarted(profile_id="p"),
            LLMRequested(),
            LLMText(text="Once upon"),
            StopRequested(),
            RunStopped(),
        ]
    )
    assert state.as_list()[-1].content == (
        "Once upon\n\n[This answer was cut short: the user stopped the run.]"
    )


def test_token_count_follows_the_last_loop_call() -> None:
    state = context_of(turn("q", "a"))
    assert state.token_count == 1020
    # A planning call's usage is not the context's; a call without usage keeps the count.
    state = fold(
        CONTEXT,
        records([LLMRequested(purpose="plan"), LLMCompleted(prompt_tokens=5)], start_seq=8),
        state,
    )
    assert state.token_count == 1020
    state = fold(CONTEXT, records([LLMRequested(), LLMCompleted()], start_seq=10), state)
    assert state.token_count == 1020


def test_compression_replaces_the_range_by_a_summary() -> None:
    events: list[Event] = [*turn("one", "1"), *turn("two", "2"), *turn("three", "3")]
    # seqs: user 2, 8, 14; answers 6, 12, 18
    log = records([SessionCreated(profile_id="p"), *events])
    before = fold(CONTEXT, log)
    compressed = records(
        [ContextCompressed(from_seq=1, to_seq=12, summary="They counted to two.")],
        start_seq=len(log) + 1,
    )
    state = fold(CONTEXT, compressed, before)
    summary, *rest = state.as_list()
    assert summary.is_summary and summary.role == "user"
    assert summary.content == "They counted to two." and summary.seq == 20
    assert [m.content for m in rest] == ["three", "3"]
    assert state.token_count == estimate_tokens(state.as_list()) == (20 + 5 + 1) // 4
    assert state.summaries == ((20, 1, 12),)
    # The display history drops nothing.
    assert len(fold(MESSAGES, log + compressed).messages()) == 6


def _tool_log() -> list[Recorded]:
    return records([SessionCreated(profile_id="p"), *tool_turn("look"), *turn("more", "ok")])


def test_a_range_that_would_split_a_tool_group_is_extended_to_its_boundary() -> None:
    # tool_turn: user 2, assistant+calls 5, result a 6, result b 8, answer 10.
    log = _tool_log()
    for to_seq in (5, 6, 7):
        compressed = records(
            [ContextCompressed(from_seq=1, to_seq=to_seq, summary="S")], start_seq=len(log) + 1
        )
        state = fold(CONTEXT, log + compressed)
        assert_well_formed(state.as_list())
        contents = [m.content for m in state.as_list()]
        # The whole group went into the summary, up to its last result (seq 8).
        assert contents[0] == "S" and "found" not in contents
        assert state.summaries[0][1:] == (1, 8)
    # A range starting inside the group takes the group from its assistant message.
    compressed = records(
        [ContextCompressed(from_seq=7, to_seq=8, summary="S")], start_seq=len(log) + 1
    )
    state = fold(CONTEXT, log + compressed)
    assert roles(state)[:2] == ["user", "user"] and state.as_list()[1].is_summary
    assert_well_formed(state.as_list())


def test_a_later_compression_supersedes_an_earlier_one() -> None:
    log = records(
        [SessionCreated(profile_id="p"), *turn("one", "1"), *turn("two", "2"), *turn("3", "3")]
    )
    n = len(log)
    first = ContextCompressed(from_seq=1, to_seq=6, summary="S1")
    # Overlapping only part of the first summary's span: the summary goes as a whole.
    second = ContextCompressed(from_seq=5, to_seq=12, summary="S2", supersedes_seq=n + 1)
    state = fold(CONTEXT, log + records([first, second], start_seq=n + 1))
    assert [m.content for m in state.as_list()] == ["S2", "3", "3"]
    assert state.summaries == ((n + 2, 1, 12),)
    # supersedes_seq alone pulls the old summary in, even when the range misses it.
    third = ContextCompressed(from_seq=14, to_seq=14, summary="S3", supersedes_seq=n + 2)
    state = fold(CONTEXT, records([third], start_seq=n + 3), state)
    assert [m.content for m in state.as_list()] == ["S3", "3"]


def test_a_compression_that_meets_nothing_changes_nothing() -> None:
    log = records([SessionCreated(profile_id="p"), *turn("one", "1")])
    before = fold(CONTEXT, log)
    for event in (
        ContextCompressed(from_seq=50, to_seq=60, summary="S"),
        ContextCompressed(from_seq=5, to_seq=4, summary="S"),  # an empty range
        ContextCompressed(from_seq=50, to_seq=60, summary="S", supersedes_seq=3),
    ):
        assert fold(CONTEXT, records([event], start_seq=20), before) == before


def test_an_open_tool_group_is_never_compressed() -> None:
    log = records(
        [
            SessionCreated(profile_id="p"),
            *turn("one", "1"),
            UserMessage(text="two"),
            RunStarted(profile_id="p"),
            LLMRequested(),
            LLMCompleted(tool_calls=(A, B)),  # seq 11
            ToolCompleted(call_id="a", name="image_view", output="x"),
            ContextCompressed(from_seq=1, to_seq=12, summary="S"),  # b is still open
            ToolCompleted(call_id="b", name="web_search", output="y"),
        ]
    )
    mid = fold_until(CONTEXT, log, 13)
    assert [m.content for m in mid.as_list()] == ["S", "", "x"]
    assert_well_formed(mid.as_list(), complete=False)
    state = fold(CONTEXT, log)
    assert [m.content for m in state.as_list()] == ["S", "", "x", "y"]
    assert_well_formed(state.as_list())


def test_calls_left_open_are_closed_before_the_next_message() -> None:
    """A log that breaks the rule (no tool.failed for an open call) still gives a sound context."""
    state = context_of(
        [
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            LLMRequested(),
            LLMCompleted(tool_calls=(A, B)),
            ToolFailed(call_id="a", name="image_view", reason="stopped"),
            ContextInjected(kind="note", content="deferred"),
            RunStopped(),  # b never got a result
            UserMessage(text="again"),
        ]
    )
    assert roles(state) == ["user", "assistant", "tool", "tool", "system", "user"]
    closing = state.as_list()[3]
    assert closing.tool_call_id == "b" and closing.success is False
    assert "No result" in closing.content
    assert_well_formed(state)


def test_a_result_for_no_open_call_is_left_out() -> None:
    state = context_of(
        [UserMessage(text="q"), ToolCompleted(call_id="zz", name="web_search", output="?")]
    )
    assert roles(state) == ["user"]


@settings(max_examples=80, deadline=None)
@given(recorded_logs(max_turns=4))
def test_generated_contexts_are_always_well_formed(log: list[Recorded]) -> None:
    state = CONTEXT.initial
    for record in log:
        counted = chars_after(state, record)  # what the state after it will count
        state = CONTEXT.evolve(state, record)
        assert counted == state.chars
        # Mid-tools, the last group may still wait for results; otherwise it is complete.
        assert_well_formed(state.as_list(), complete=not state.open_calls)
        assert bool(state.deferred) <= bool(state.open_calls)
        # The running count is the count of the messages as they are.
        assert state.chars // 4 == estimate_tokens(state.as_list())
    assert not state.open_calls
    # Compression never loses a message that is not covered by a summary.
    covered = [range(first, last + 1) for _, first, last in state.summaries]
    shown = {m.seq for m in state.as_list()}
    for message in fold(MESSAGES, log).messages():
        if message.role == "user" and not any(message.seq in r for r in covered):
            assert message.seq in shown


def test_message_defaults_fit_the_context() -> None:
    message = Message(role="user", content="x", created_at="t", seq=1)
    assert estimate_tokens([message]) == 0
    with pytest.raises(TypeError):
        Message(role="user", content="x")  # type: ignore[call-arg]


def test_estimate_tokens_counts_each_message_s_calls_however_often_asked() -> None:
    def with_call(arguments: dict[str, object]) -> Message:
        call = ToolCall(id="c", name="todo", arguments=arguments)
        return Message(role="assistant", content="", created_at="", seq=1, tool_calls=(call,))

    short, long = with_call({"a": 1}), with_call({"action": "read", "text": "x" * 400})
    expected_short = (len("todo") + len('{"a":1}')) // 4
    for _ in range(3):  # remembered per message, never across messages
        assert estimate_tokens([short]) == expected_short
        assert estimate_tokens([long]) > 100
        assert estimate_tokens([short, long]) == estimate_tokens([long, short])
    assert estimate_tokens([with_call({"a": 1})]) == expected_short
