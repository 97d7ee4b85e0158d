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


@settings(max_examples=60, deadline=None)
@given(st.lists(session_logs(max_turns=2), min_size=1, max_size=3), st.data())
def test_counts_agree_with_messages_and_interleaving_does_not_matter(
    logs: list[list[Event]], data: st.DataObject
) -> None:
    streams = [records(events, stream_id=f"s{i}") for i, events in enumerate(logs)]
    order = data.draw(st.lists(st.integers(0, len(streams) - 1), max_size=40))
    merged = interleave(streams, order)
    state = fold(SESSIONS, merged)
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
