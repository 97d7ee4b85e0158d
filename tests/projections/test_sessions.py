from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from events.envelope import Recorded
from events.types import (
    ContextCompressed,
    Event,
    LLMCompleted,
    LLMRequested,
    LLMText,
    NoteSaved,
    ProfileSwitched,
    RunCompleted,
    RunStarted,
    RunStopped,
    SessionCreated,
    SessionDeleted,
    SessionPinned,
    SessionRenamed,
    StopRequested,
    SubagentFinished,
    SubagentSpawned,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCompleted,
    ToolFailed,
    ToolRequested,
    UserMessage,
)
from projections.fold import fold, fold_until_position
from projections.messages import MESSAGES
from projections.sessions import SESSIONS, SessionsState, cut_title
from tests.projections.logs import interleave, records, session_logs

LONG = "Please plan a three week trip through Japan with a focus on food and old temples"


def answer_turn(text: str, answer: str) -> list[Event]:
    return [
        UserMessage(text=text),
        RunStarted(profile_id="secretary"),
        LLMRequested(),
        LLMText(text=answer[:3]),
        LLMCompleted(content=answer, prompt_tokens=300, completion_tokens=12),
        RunCompleted(content=answer),
    ]


def global_log(*streams: tuple[str, list[Event]]) -> list[Recorded]:
    """Streams one after the other in the global log, each starting a minute apart."""
    log: list[Recorded] = []
    for index, (stream_id, events) in enumerate(streams):
        log += records(
            events, stream_id=stream_id, start_position=len(log) + 1, t0=1_700_000_000 + 60 * index
        )
    return log


def test_a_session_summary() -> None:
    log = global_log(
        ("s1", [SessionCreated(profile_id="secretary", user_id="ann"), *answer_turn(LONG, "Sure")])
    )
    state = fold(SESSIONS, log)
    summary = state.get("s1")
    assert summary is not None
    assert summary.title == "Please plan a three week trip through Japan with a focus on…"
    assert len(summary.title) == 60
    assert summary.message_count == 2 and summary.preview == "Sure"
    assert summary.user_id == "ann" and summary.profile_id == "secretary"
    assert summary.context_token_count == 312
    assert summary.created_at == "2023-11-14T22:13:21.000+00:00"
    assert summary.last_active == "2023-11-14T22:13:27.000+00:00"  # run.completed, seq 7
    assert not summary.pinned and not summary.deleted


def test_titles_previews_profiles_pins() -> None:
    log = global_log(
        (
            "s1",
            [
                SessionCreated(profile_id="secretary"),
                SessionRenamed(title="Trip"),
                *answer_turn("hello", "x" * 70 + " the end"),
                ProfileSwitched(profile_id="coder", profile_name="Coder"),
                SessionPinned(pinned=True),
                ContextCompressed(from_seq=1, to_seq=3, summary="s"),
            ],
        )
    )
    summary = fold(SESSIONS, log).get("s1")
    assert summary is not None
    assert summary.title == "Trip"  # renamed before the first message: it stays
    assert summary.preview == ("x" * 70 + " the end")[-60:]
    assert summary.profile_id == "coder" and summary.pinned
    assert summary.context_token_count == 0  # reset by the compression, as in the original


def test_listing_order_deleted_and_subagents() -> None:
    log = global_log(
        ("old", [SessionCreated(profile_id="p"), *answer_turn("a", "b")]),
        ("pinned", [SessionCreated(profile_id="p"), SessionPinned(pinned=True)]),
        ("gone", [SessionCreated(profile_id="p"), SessionDeleted()]),
        ("child", [SessionCreated(profile_id="p", parent_stream_id="old"), UserMessage(text="t")]),
        ("new", [SessionCreated(profile_id="p", title="New one")]),
        ("memory", [NoteSaved(note_id="n", text="not a session")]),
    )
    state = fold(SESSIONS, log)
    assert [s.session_id for s in state.listing()] == ["pinned", "new", "old"]
    assert state.get("gone") is not None and state.get("gone").deleted  # type: ignore[union-attr]
    assert state.get("child") is None and "child" in state.subagent_streams
    assert state.get("memory") is None
    # Pinning is not activity: "old" moves up among the pinned, but is not more recent.
    later = records([SessionPinned(pinned=True)], stream_id="old", start_seq=8, t0=1_800_000_000)
    after = fold(SESSIONS, later, state)
    assert [s.session_id for s in after.listing()] == ["pinned", "old", "new"]
    before_pin, after_pin = state.get("old"), after.get("old")
    assert before_pin is not None and after_pin is not None
    assert after_pin.pinned and after_pin.last_active == before_pin.last_active


def _pending(log: list[Recorded], upto: int) -> int:
    summary = fold(SESSIONS, log[:upto]).get("s1")
    assert summary is not None
    return summary.pending_approvals


def test_pending_approvals_count_calls_that_wait_here_and_in_subagents() -> None:
    """The web client marks a listed session by ``pending_approvals``: a request counts
    until its decision, its call's result, or the end of its run; a subagent's counts
    in its top-level session (even a subagent's subagent's)."""
    mine = [
        SessionCreated(profile_id="p"),
        UserMessage(text="go"),
        RunStarted(profile_id="p"),
        ToolRequested(call_id="a", name="terminal"),
        ToolApprovalRequested(call_id="a", name="terminal"),  # 5: one waits
        ToolRequested(call_id="b", name="code_exec"),
        ToolApprovalRequested(call_id="b", name="code_exec"),  # 7: two wait
        ToolApprovalDecided(call_id="a", approved=True, by="ann"),  # 8: one
        ToolCompleted(call_id="a", name="terminal", output="ok"),
        ToolFailed(call_id="b", name="code_exec", reason="stopped"),  # 10: none
        SubagentSpawned(child_stream_id="kid", call_id="c", task="t"),
    ]
    kid = [
        SessionCreated(profile_id="p", parent_stream_id="s1"),
        ToolApprovalRequested(call_id="k", name="terminal"),  # the kid's request
    ]
    grandkid = [
        SessionCreated(profile_id="p", parent_stream_id="kid"),
        ToolApprovalRequested(call_id="g", name="terminal"),  # and the grandkid's
        LLMText(text="chunks of a subagent change nothing"),
    ]
    tail = [SubagentFinished(child_stream_id="kid", call_id="c"), RunCompleted(content="")]
    log = [
        *records(mine, stream_id="s1"),
        *records(kid, stream_id="kid", start_position=20),
        *records(grandkid, stream_id="grandkid", start_position=30),
        *records(tail, stream_id="s1", start_seq=12, start_position=40),
        *records(
            [SessionCreated(profile_id="p", user_id="bob"), *mine[1:5]],
            stream_id="other",
            start_position=50,
        ),
    ]
    assert [_pending(log, n) for n in (4, 5, 7, 8, 9, 10, 11)] == [0, 1, 2, 1, 1, 0, 0]
    assert _pending(log, 13) == 1
    with_kids = fold(SESSIONS, log[:15])
    assert with_kids.get("s1").pending_approvals == 2  # type: ignore[union-attr]
    assert with_kids.get("kid") is None and with_kids.roots["grandkid"] == "s1"
    chunk_state = fold(SESSIONS, log[15:16], with_kids)
    assert chunk_state is with_kids  # a subagent's chunk: nothing to copy
    # The subagent finished (its waits with it; its subagent's run has not ended in this
    # log), then the top-level run ended.
    assert _pending(log, 17) == 1
    state = fold(SESSIONS, log)
    assert state.get("s1").pending_approvals == 0  # type: ignore[union-attr]
    # Another user's session counts its own, and only its own.
    assert state.get("other").pending_approvals == 1  # type: ignore[union-attr]
    # The run's end ends every wait, its subagents' included.
    ended = records([RunStopped()], stream_id="s1", start_seq=12, start_position=60)
    assert fold(SESSIONS, ended, with_kids).get("s1").pending_approvals == 0  # type: ignore[union-attr]


def test_a_fork_names_its_origin_and_a_repeat_creation_changes_nothing() -> None:
    log = global_log(
        ("fork", [SessionCreated(profile_id="p", forked_from="s1", forked_at_seq=7)]),
    )
    state = fold(SESSIONS, log)
    summary = state.get("fork")
    assert summary is not None and (summary.forked_from, summary.forked_at_seq) == ("s1", 7)
    again = records([SessionCreated(profile_id="other")], stream_id="fork", start_seq=2)
    assert fold(SESSIONS, again, state).get("fork") == summary


def test_a_stopped_partial_answer_counts_as_a_message() -> None:
    events: list[Event] = [
        SessionCreated(profile_id="p"),
        UserMessage(text="story"),
        RunStarted(profile_id="p"),
        LLMRequested(),
        LLMText(text="Once"),
        LLMText(text=" upon"),
        StopRequested(),
        RunStopped(),
    ]
    summary = fold(SESSIONS, records(events)).get("s1")
    assert summary is not None and summary.message_count == 2
    assert summary.preview == "story"


def test_cut_title() -> None:
    assert cut_title("  short\n title ") == "short title"
    assert cut_title("x" * 61) == "x" * 59 + "…"


def test_each_users_list_and_count_are_theirs_and_follow_deletes() -> None:
    log = global_log(
        ("a1", [SessionCreated(profile_id="p", user_id="ann"), *answer_turn("a", "b")]),
        ("b1", [SessionCreated(profile_id="p", user_id="bob")]),
        ("a2", [SessionCreated(profile_id="p", user_id="ann"), SessionPinned(pinned=True)]),
        ("a3", [SessionCreated(profile_id="p", user_id="ann"), SessionDeleted()]),
        ("child", [SessionCreated(profile_id="p", user_id="ann", parent_stream_id="a1")]),
    )
    state = fold(SESSIONS, log)
    for user in ("ann", "bob", "nobody"):
        everyone = [s for s in state.listing() if s.user_id == user]
        assert state.listing_of(user) == everyone
        assert state.count_of(user) == len(everyone)
    assert [s.session_id for s in state.listing_of("ann")] == ["a2", "a1"]
    gone = records([SessionDeleted()], stream_id="a2", start_seq=3, t0=1_800_000_000)
    after = fold(SESSIONS, gone, state)
    assert [s.session_id for s in after.listing_of("ann")] == ["a1"] and after.count_of("ann") == 1
    # The state it was made from is as it was (persistent maps, never changed).
    assert state.count_of("ann") == 2 and state.get("a2").deleted is False  # type: ignore[union-attr]


@settings(max_examples=60, deadline=None)
@given(st.lists(session_logs(max_turns=2), min_size=1, max_size=3), st.data())
def test_counts_agree_with_messages_and_interleaving_does_not_matter(
    logs: list[list[Event]], data: st.DataObject
) -> None:
    streams = [records(events, stream_id=f"s{i}") for i, events in enumerate(logs)]
    order = data.draw(st.lists(st.integers(0, len(streams) - 1), max_size=40))
    merged = interleave(streams, order)
    state = fold(SESSIONS, merged)
    for user in {summary.user_id for summary in state.listing()}:
        assert state.listing_of(user) == [s for s in state.listing() if s.user_id == user]
    # Any interleaving of the streams gives the same sessions.
    assert state == fold(SESSIONS, interleave(streams, list(range(len(streams)))))
    for stream in streams:
        summary = state.get(stream[0].stream_id)
        assert summary is not None
        assert summary.message_count == len(fold(MESSAGES, stream).messages())
    # As of a position, only what was logged by then counts.
    cut = data.draw(st.integers(0, len(merged)))
    early: SessionsState = fold_until_position(SESSIONS, merged, cut)
    for stream in streams:
        seen = [r for r in merged[:cut] if r.stream_id == stream[0].stream_id]
        summary = early.get(stream[0].stream_id)
        if not seen:
            assert summary is None
        else:
            assert summary is not None
            assert summary.message_count == len(fold(MESSAGES, seen).messages(with_streaming=False))


def test_a_run_that_never_answered_and_said_nothing_adds_no_message() -> None:
    """As /v1 seeds a client's system prompt: a run of its own that ends with nothing
    said. Neither the history nor the count shows it (they must agree)."""
    from events.types import ContextInjected

    events: list[Event] = [
        SessionCreated(profile_id="p"),
        RunStarted(profile_id="p"),
        ContextInjected(kind="client_system", role="system", content="Answer in one line."),
        RunCompleted(content=""),
        *answer_turn("Capital of France?", "Paris."),
    ]
    log = records(events)
    shown = fold(MESSAGES, log).messages()
    assert [(m.role, m.content) for m in shown] == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
    ]
    summary = fold(SESSIONS, log).get("s1")
    assert summary is not None and summary.message_count == len(shown) == 2
