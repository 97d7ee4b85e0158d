from __future__ import annotations

import msgspec

from events.types import (
    ContextCompressed,
    ContextInjected,
    Event,
    FileRef,
    ImageRef,
    LLMCompleted,
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
    SessionDeleted,
    StopRequested,
    ToolCall,
    ToolCompleted,
    ToolFailed,
    ToolProgress,
    ToolRequested,
    UserMessage,
)
from projections.fold import fold, fold_until
from projections.messages import MESSAGES, MessagesState
from tests.projections.logs import T0, records

CALL = ToolCall(id="c1", name="web_search", arguments={"query": "navi"})


def messages_of(events: list[Event]) -> MessagesState:
    return fold(MESSAGES, records([SessionCreated(profile_id="p"), *events]))


def test_a_streamed_answer_is_in_progress_then_final() -> None:
    events: list[Event] = [
        UserMessage(text="hello", images=("aW1n",), files=(FileRef(name="a", path="/f/a"),)),
        RunStarted(profile_id="p"),
        LLMRequested(),
        LLMThinking(text="let me "),
        LLMThinking(text="think"),
        LLMText(text="Hi"),
        LLMText(text=" there"),
        LLMCompleted(content="Hi there!", thinking="let me think"),
        RunCompleted(content="Hi there!"),
    ]
    log = records([SessionCreated(profile_id="p"), *events])
    during = fold_until(MESSAGES, log, 8)
    assert during.streaming is not None
    assert [m.role for m in during.messages()] == ["user", "assistant"]
    assert during.messages()[-1].content == "Hi there"
    assert during.messages()[-1].thinking == "let me think"
    assert [m.role for m in during.messages(with_streaming=False)] == ["user"]

    final = fold(MESSAGES, log)
    assert final.streaming is None
    user, answer = final.messages()
    assert (user.content, user.images, user.files, user.seq) == ("hello", ("aW1n",), user.files, 2)
    assert (answer.content, answer.thinking, answer.seq) == ("Hi there!", "let me think", 9)
    assert answer.created_at == "2023-11-14T22:13:29.000+00:00"  # T0 + seq 9, in UTC


def test_messages_encode_without_absent_fields() -> None:
    final = messages_of([UserMessage(text="hi"), RunStarted(profile_id="p"), LLMRequested()])
    encoded = msgspec.json.decode(msgspec.json.encode(final.messages()))
    assert encoded == [
        {"role": "user", "content": "hi", "created_at": "2023-11-14T22:13:22.000+00:00", "seq": 2}
    ]


def test_a_reissued_call_supersedes_the_partial_chunks() -> None:
    final = messages_of(
        [
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            LLMRequested(iteration=0, attempt=1),
            LLMText(text="The answ"),
            LLMRequested(iteration=0, attempt=2),  # re-issued after a crash
            LLMText(text="The answer"),
            LLMCompleted(content="The answer."),
            RunCompleted(),
        ]
    )
    assert [m.content for m in final.messages()] == ["q", "The answer."]


def test_tool_calls_and_results() -> None:
    other = ToolCall(id="c2", name="terminal")
    third = ToolCall(id="c3", name="ssh_exec")
    fourth = ToolCall(id="c4", name="code_exec")
    calls = (CALL, other, third, fourth)
    final = messages_of(
        [
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            LLMRequested(),
            LLMToolCalls(calls=calls),
            LLMCompleted(tool_calls=calls),
            ToolRequested(call_id="c1", name="web_search"),
            ToolCompleted(call_id="c1", name="web_search", output="3 results"),
            ToolCompleted(call_id="c2", name="terminal", output="", success=False, error="denied"),
            ToolFailed(call_id="c3", name="ssh_exec", reason="interrupted"),
            ToolFailed(call_id="c4", name="code_exec", reason="timeout", error="after 30 s"),
        ]
    )
    _, assistant, *results = final.messages()
    assert assistant.tool_calls == calls and assistant.role == "assistant"
    assert [(m.role, m.tool_call_id, m.name, m.success) for m in results] == [
        ("tool", "c1", "web_search", True),
        ("tool", "c2", "terminal", False),
        ("tool", "c3", "ssh_exec", False),
        ("tool", "c4", "code_exec", False),
    ]
    assert results[0].content == "3 results"
    assert results[1].content == "Error: denied"
    assert "may or may not have happened" in results[2].content
    assert results[3].content == "Timed out: the call did not finish in time. (after 30 s)"
    encoded = msgspec.json.decode(msgspec.json.encode(assistant))
    assert encoded["tool_calls"] == [
        {"id": "c1", "name": "web_search", "arguments": {"query": "navi"}},
        {"id": "c2", "name": "terminal", "arguments": {}},
        {"id": "c3", "name": "ssh_exec", "arguments": {}},
        {"id": "c4", "name": "code_exec", "arguments": {}},
    ]


def test_a_running_calls_last_progress_is_kept_until_its_result() -> None:
    other = ToolCall(id="c2", name="terminal")
    begun = [
        UserMessage(text="q"),
        RunStarted(profile_id="p"),
        LLMRequested(),
        LLMCompleted(tool_calls=(CALL, other)),
        ToolProgress(call_id="c1", progress=1, total=4, message="one"),
        ToolProgress(call_id="c2", progress=5),
        ToolProgress(call_id="c1", progress=3, total=4, message="three"),
    ]
    running = messages_of(begun)
    assert [(p.call_id, p.progress, p.message) for p in running.progress] == [
        ("c2", 5, ""),
        ("c1", 3, "three"),
    ]
    assert len(running.messages()) == 2  # progress is no message of its own
    settled = messages_of([*begun, ToolCompleted(call_id="c1", name="web_search", output="ok")])
    assert [p.call_id for p in settled.progress] == ["c2"]
    ended = messages_of([*begun, StopRequested(), RunStopped()])
    assert ended.progress == ()


def test_a_stopped_call_says_so() -> None:
    final = messages_of([ToolFailed(call_id="c1", name="terminal", reason="stopped")])
    assert final.messages()[0].content.startswith("Stopped: the user stopped the run")


def test_the_plan_is_shown_and_the_planning_call_is_not() -> None:
    final = messages_of(
        [
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            LLMRequested(purpose="plan"),
            LLMText(text="1. search"),
            LLMCompleted(content="1. search\n2. answer"),
            PlanReady(plan="1. search\n2. answer"),
            ContextInjected(kind="budget", content="10 iterations left"),
            LLMRequested(),
            LLMCompleted(content="answer"),
            RunCompleted(),
            ContextCompressed(from_seq=1, to_seq=9, summary="they asked"),
        ]
    )
    assert [(m.role, m.content, m.is_plan) for m in final.messages()] == [
        ("user", "q", False),
        ("assistant", "1. search\n2. answer", True),
        ("assistant", "answer", False),
    ]


def test_a_stop_mid_stream_keeps_the_partial_text() -> None:
    final = messages_of(
        [
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            LLMRequested(),
            LLMText(text="Once upon"),
            LLMToolCalls(calls=(CALL,)),
            StopRequested(),
            LLMText(text=" a time"),
            RunStopped(),
        ]
    )
    _user, partial = final.messages()
    assert partial.content == "Once upon a time"
    assert partial.tool_calls == ()  # it never ran
    assert partial.seq == 5  # where the answer began
    assert final.streaming is None


def test_a_failed_run_keeps_the_partial_text_and_not_an_empty_one() -> None:
    failed = messages_of(
        [
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            LLMRequested(),
            LLMText(text="Part"),
            RunFailed(error="boom"),
        ]
    )
    assert [m.content for m in failed.messages()] == ["q", "Part"]
    empty = messages_of(
        [
            UserMessage(text="q"),
            RunStarted(profile_id="p"),
            LLMRequested(),
            LLMToolCalls(calls=(CALL,)),
            RunFailed(error="boom"),
        ]
    )
    # Nothing of the answer was shown: a message of its own says how the run ended.
    assert [(m.role, m.content, m.error) for m in empty.messages()] == [
        ("user", "q", None),
        ("assistant", "", "boom"),
    ]


def test_deleted_and_subagent_sessions() -> None:
    deleted = messages_of([UserMessage(text="q"), SessionDeleted()])
    assert deleted.deleted and len(deleted.messages()) == 1
    child = fold(
        MESSAGES,
        records([SessionCreated(profile_id="p", parent_stream_id="s0"), UserMessage(text="task")]),
    )
    assert child.is_subagent and child.messages()[0].is_subagent
    assert msgspec.json.decode(msgspec.json.encode(child.messages()[0]))["is_subagent"] is True


def test_timestamps_are_utc_whatever_the_local_zone() -> None:
    state = messages_of([UserMessage(text="q")])
    assert state.messages()[0].created_at.endswith("+00:00")
    assert T0 == 1_700_000_000.0


def test_a_tool_message_carries_the_image_the_tool_returned_as_a_reference() -> None:
    ref = ImageRef(sha256="b" * 64, size=10, media_type="image/png")
    kept = {"is_image": True, "image": msgspec.to_builtins(ref), "mime_type": "image/png"}
    final = messages_of(
        [
            ToolCompleted(call_id="c1", name="image_view", output="Image loaded", metadata=kept),
            # Recorded inline (a log without a blob store): for the LLM, not the page.
            ToolCompleted(
                call_id="c2",
                name="image_view",
                output="x",
                metadata={"is_image": True, "base64": "aW1n"},
            ),
            ToolCompleted(call_id="c3", name="image_view", output="y", metadata={"image": "junk"}),
            ToolFailed(call_id="c4", name="image_view"),
        ]
    )
    shown, inline, junk, failed = final.messages()
    assert shown.images == (ref,)
    assert msgspec.json.decode(msgspec.json.encode(shown))["images"] == [
        {"sha256": "b" * 64, "size": 10, "media_type": "image/png"}
    ]
    assert inline.images == junk.images == failed.images == ()
