from __future__ import annotations

from events.types import (
    Event,
    MemoryExtractionFailed,
    MemoryFactEdited,
    MemoryFactForgotten,
    MemoryFactLearned,
    MemoryReset,
    MemorySessionProcessed,
    MemorySummaryUpdated,
    UserMessage,
)
from projections.fold import fold, fold_until
from projections.memory import MEMORY, FactSource, MemoryState
from tests.projections.logs import T0, records


def learned(fid: str, value: str, *, said_at: float = 0.0, session: str = "s1") -> Event:
    return MemoryFactLearned(
        fact_id=fid,
        category="preference",
        key=fid.removeprefix("f_"),
        value=value,
        session_id=session,
        from_seq=1,
        to_seq=4,
        source_seqs=(2, 4),
        said_at=said_at,
        model="m",
    )


def state_of(*events: Event) -> MemoryState:
    return fold(MEMORY, records(events, stream_id="memory:local"))


def test_a_learned_fact_keeps_its_value_source_and_model() -> None:
    state = state_of(learned("f_editor", "vim", said_at=5.0))
    [fact] = state.active()
    assert (fact.fact_id, fact.category, fact.key, fact.value) == (
        "f_editor",
        "preference",
        "editor",
        "vim",
    )
    assert fact.source == FactSource(session_id="s1", from_seq=1, to_seq=4, seqs=(2, 4))
    assert fact.model == "m" and fact.said_at == 5.0
    assert fact.learned_at == T0 + 1 and fact.updated_seq == 1
    assert state.facts_seq == 1 and state.seq == 1


def test_a_newer_value_replaces_the_older_one_which_stays_in_history() -> None:
    state = state_of(learned("f_editor", "vim"), learned("f_editor", "helix"))
    [fact] = state.active()
    assert fact.value == "helix"
    assert [(v.kind, v.value, v.seq) for v in fact.history] == [
        ("learned", "vim", 1),
        ("learned", "helix", 2),
    ]
    assert fact.learned_at == T0 + 1 and fact.updated_at == T0 + 2


def test_forgetting_leaves_a_tombstone_without_the_value() -> None:
    state = state_of(
        learned("f_editor", "vim"),
        learned("f_editor", "helix"),
        MemoryFactForgotten(fact_id="f_editor"),
    )
    assert state.active() == [] and state.active_fact("f_editor") is None
    tomb = state.facts["f_editor"]
    assert tomb.forgotten and tomb.value == "" and tomb.decided_at == T0 + 3
    assert [v.value for v in tomb.history] == ["", "", ""]
    assert [v.kind for v in tomb.history] == ["learned", "learned", "forgotten"]
    assert state.facts_seq == 3


def test_forgetting_drops_a_summary_written_from_the_fact() -> None:
    state = state_of(
        learned("f_editor", "vim"),
        learned("f_os", "linux"),
        MemorySummaryUpdated(
            text="Uses vim on linux.", fact_ids=("f_editor", "f_os"), based_on_seq=2
        ),
    )
    assert state.summary_is_current
    after = fold(MEMORY, records([MemoryFactForgotten(fact_id="f_os")], start_seq=4), state)
    assert after.summary is None and not after.summary_is_current


def test_a_summary_is_stale_once_a_fact_changes_but_is_kept_if_it_did_not_mention_it() -> None:
    state = state_of(
        learned("f_editor", "vim"),
        MemorySummaryUpdated(text="Uses vim.", fact_ids=("f_editor",), based_on_seq=1),
        learned("f_os", "linux"),
    )
    assert state.summary is not None and not state.summary_is_current
    forgot_other = fold(MEMORY, records([MemoryFactForgotten(fact_id="f_os")], start_seq=4), state)
    assert forgot_other.summary == state.summary


def test_an_edit_is_a_user_decision_and_drops_the_summary() -> None:
    state = state_of(
        learned("f_editor", "vim"),
        MemorySummaryUpdated(text="Uses vim.", fact_ids=("f_editor",), based_on_seq=1),
        MemoryFactEdited(fact_id="f_editor", value="emacs"),
    )
    fact = state.active_fact("f_editor")
    assert fact is not None
    assert fact.value == "emacs" and fact.edited_by_user and fact.source is None
    assert fact.decided_at == T0 + 3
    assert state.summary is None


def test_editing_an_unknown_fact_changes_nothing() -> None:
    assert state_of(MemoryFactEdited(fact_id="f_x", value="v")).facts == {}


def test_learning_a_forgotten_fact_again_brings_it_back_with_a_new_learned_at() -> None:
    state = state_of(
        learned("f_editor", "vim"),
        MemoryFactForgotten(fact_id="f_editor"),
        learned("f_editor", "helix"),
    )
    fact = state.active_fact("f_editor")
    assert fact is not None and fact.value == "helix" and fact.learned_at == T0 + 3
    assert fact.decided_at == T0 + 2  # remembered: older messages must not overrule it


def test_processed_ranges_and_failures() -> None:
    state = state_of(
        MemoryExtractionFailed(session_id="s1", from_seq=1, to_seq=9, error="bad"),
        MemoryExtractionFailed(session_id="s1", from_seq=1, to_seq=9, error="bad"),
    )
    assert state.attempts("s1", 1) == 2 and state.attempts("s1", 10) == 0
    assert state.processed_seq("s1") == 0
    state = fold(
        MEMORY,
        records([MemorySessionProcessed(session_id="s1", from_seq=1, to_seq=9)], start_seq=3),
        state,
    )
    assert state.processed_seq("s1") == 9 and state.attempts("s1", 1) == 0
    # A late or repeated range never moves the processed seq back.
    state = fold(
        MEMORY,
        records([MemorySessionProcessed(session_id="s1", from_seq=1, to_seq=4)], start_seq=4),
        state,
    )
    assert state.processed_seq("s1") == 9


def test_a_reset_keeps_only_the_users_decisions() -> None:
    state = state_of(
        learned("f_editor", "vim"),
        learned("f_os", "linux"),
        learned("f_lang", "python"),
        MemoryFactForgotten(fact_id="f_os"),
        MemoryFactEdited(fact_id="f_lang", value="rust"),
        MemorySessionProcessed(session_id="s1", from_seq=1, to_seq=9),
        MemorySummaryUpdated(text="...", fact_ids=("f_editor", "f_lang"), based_on_seq=5),
        MemoryReset(model="m2"),
    )
    assert set(state.facts) == {"f_os", "f_lang"}
    assert state.facts["f_os"].forgotten
    assert [f.value for f in state.active()] == ["rust"]
    assert state.processed == {} and state.summary is None
    assert state.generation == 1 and state.reset_seq == 8 == state.facts_seq


def test_other_events_only_move_the_seq() -> None:
    state = state_of(UserMessage(text="not a memory event"))
    assert state == MemoryState(seq=1)


def test_folding_as_of_a_seq_gives_the_memory_of_that_moment() -> None:
    log = records(
        [learned("f_editor", "vim"), learned("f_editor", "helix")], stream_id="memory:local"
    )
    past = fold_until(MEMORY, log, 1)
    assert [f.value for f in past.active()] == ["vim"]
    one_by_one = MEMORY.initial
    for record in log:
        one_by_one = MEMORY.evolve(one_by_one, record)
    assert one_by_one == fold(MEMORY, log)
