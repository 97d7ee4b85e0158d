"""The pure decisions: which memory events to append, given the state."""

from __future__ import annotations

import pytest

from events.types import (
    Event,
    MemoryExtractionFailed,
    MemoryFactEdited,
    MemoryFactForgotten,
    MemoryFactLearned,
    MemoryReset,
    MemorySessionProcessed,
    MemorySummaryUpdated,
)
from navi.memory import decisions
from navi.memory.extraction import ExtractedFact
from navi.memory.facts import fact_id
from navi.memory.turns import Turn, TurnChunk
from projections.fold import fold
from projections.memory import MEMORY, MemoryState
from tests.projections.logs import records

EDITOR = fact_id("preference", "editor")


def chunk(*turns: tuple[int, float], after: int = 0, to: int = 10) -> TurnChunk:
    return TurnChunk(
        after_seq=after,
        to_seq=to,
        turns=tuple(Turn(seq=s, role="user", text="...", timestamp=t) for s, t in turns),
    )


def state_of(*events: Event, t0: float = 0.0) -> MemoryState:
    """Memory events recorded at t0 + 1, t0 + 2, ..."""
    return fold(MEMORY, records(events, stream_id="memory:local", t0=t0))


def learned_value(state: MemoryState, value: str, said_at: float) -> list[Event]:
    facts = [ExtractedFact("preference", "Editor", value, [2])]
    return decisions.learn(
        state, chunk((2, said_at)), facts, session_id="s", generation=state.generation, model="m"
    )


def test_learning_names_the_fact_its_source_and_the_range() -> None:
    facts = [ExtractedFact("preference", "Editor ", " vim ", [5, 2, 5])]
    events = decisions.learn(
        MemoryState(), chunk((2, 1.0), (5, 3.0)), facts, session_id="s", generation=0, model="m"
    )
    assert events == [
        MemoryFactLearned(
            fact_id=EDITOR,
            category="preference",
            key="editor",
            value="vim",
            session_id="s",
            from_seq=1,
            to_seq=10,
            source_seqs=(2, 5),
            said_at=3.0,
            model="m",
        ),
        MemorySessionProcessed(session_id="s", from_seq=1, to_seq=10, facts=1, model="m"),
    ]


def test_an_answer_naming_a_fact_twice_keeps_the_later_message() -> None:
    facts = [
        ExtractedFact("preference", "editor", "helix", [5]),
        ExtractedFact("preference", "editor", "vim", [2]),
    ]
    events = decisions.learn(
        MemoryState(), chunk((2, 1.0), (5, 3.0)), facts, session_id="s", generation=0, model="m"
    )
    assert [e.value for e in events if isinstance(e, MemoryFactLearned)] == ["helix"]


def test_a_stale_decision_decides_nothing() -> None:
    done = state_of(MemorySessionProcessed(session_id="s", from_seq=1, to_seq=10))
    assert learned_value(done, "vim", 1.0) == []  # the range was processed meanwhile
    reset = state_of(MemoryReset())
    stale = decisions.learn(reset, chunk((2, 1.0)), [], session_id="s", generation=0, model="m")
    assert stale == []  # decided before a reset
    assert decisions.skip(done, chunk(), session_id="s", generation=0, reason="") == []
    assert (
        decisions.fail(
            done, chunk(), "bad", session_id="s", generation=0, model="m", max_attempts=3
        )
        == []
    )


def test_the_same_value_again_is_no_change_but_the_range_is_processed() -> None:
    state = state_of(learned_value(MemoryState(), "vim", 1.0)[0])
    events = learned_value(state, "vim", 5.0)
    assert [type(e) for e in events] == [MemorySessionProcessed]


def test_only_a_message_newer_than_the_value_replaces_it() -> None:
    state = state_of(learned_value(MemoryState(), "helix", 10.0)[0])
    assert [type(e) for e in learned_value(state, "vim", 5.0)] == [MemorySessionProcessed]
    assert isinstance(learned_value(state, "vim", 11.0)[0], MemoryFactLearned)


def test_user_decisions_stand_against_older_messages() -> None:
    base = learned_value(MemoryState(), "vim", 1.0)[0]
    forgotten = state_of(base, MemoryFactForgotten(fact_id=EDITOR), t0=100.0)  # at 102
    assert [type(e) for e in learned_value(forgotten, "vim", 50.0)] == [MemorySessionProcessed]
    assert isinstance(learned_value(forgotten, "vim", 103.0)[0], MemoryFactLearned)
    edited = state_of(base, MemoryFactEdited(fact_id=EDITOR, value="emacs"), t0=100.0)
    assert [type(e) for e in learned_value(edited, "vim", 50.0)] == [MemorySessionProcessed]
    assert isinstance(learned_value(edited, "vim", 103.0)[0], MemoryFactLearned)


def test_broken_answers_are_counted_then_the_range_is_skipped() -> None:
    state = MemoryState()
    for attempt in (1, 2):
        events = decisions.fail(
            state, chunk(), "bad", session_id="s", generation=0, model="m", max_attempts=3
        )
        assert [type(e) for e in events] == [MemoryExtractionFailed]
        state = fold(MEMORY, records(events, start_seq=state.seq + 1), state)
        assert state.attempts("s", 1) == attempt
    events = decisions.fail(
        state, chunk(), "bad", session_id="s", generation=0, model="m", max_attempts=3
    )
    assert [type(e) for e in events] == [MemoryExtractionFailed, MemorySessionProcessed]
    assert isinstance(events[1], MemorySessionProcessed)
    assert events[1].skipped == "3 unusable extraction answers"


def test_forget_and_edit_need_an_active_fact() -> None:
    state = state_of(learned_value(MemoryState(), "vim", 1.0)[0])
    assert decisions.forget(state, EDITOR) == [MemoryFactForgotten(fact_id=EDITOR)]
    with pytest.raises(decisions.FactNotFound, match="does not exist"):
        decisions.forget(state, "f_nope")
    gone = fold(MEMORY, records([MemoryFactForgotten(fact_id=EDITOR)], start_seq=2), state)
    with pytest.raises(decisions.FactNotFound, match="was forgotten"):
        decisions.forget(gone, EDITOR)
    with pytest.raises(decisions.FactNotFound):
        decisions.edit(gone, EDITOR, "emacs")
    assert decisions.edit(state, EDITOR, "  emacs ") == [
        MemoryFactEdited(fact_id=EDITOR, value="emacs")
    ]
    with pytest.raises(ValueError, match="empty"):
        decisions.edit(state, EDITOR, "   ")
    with pytest.raises(ValueError, match="longer"):
        decisions.edit(state, EDITOR, "x" * 3000)


def test_a_summary_of_facts_that_changed_meanwhile_is_not_recorded() -> None:
    state = state_of(learned_value(MemoryState(), "vim", 1.0)[0])
    assert decisions.summarize(
        state, "Uses vim.", model="m", based_on_seq=1, fact_ids=[EDITOR]
    ) == [MemorySummaryUpdated(text="Uses vim.", model="m", fact_ids=(EDITOR,), based_on_seq=1)]
    later = fold(MEMORY, records([MemoryFactForgotten(fact_id=EDITOR)], start_seq=2), state)
    assert decisions.summarize(later, "Uses vim.", model="m", based_on_seq=1, fact_ids=[]) == []
