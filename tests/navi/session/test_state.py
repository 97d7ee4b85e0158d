"""``SessionState`` folds each record only into the parts its type changes: every part
must still equal its pure projection folded over the whole log."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from events.types import (
    EVENT_TYPES,
    Event,
    NoteDeleted,
    NoteSaved,
    SessionDeleted,
    SessionPinned,
)
from navi.run import progress as run_progress
from navi.session import state as session_state
from navi.session.state import SessionState
from projections import context as context_projection
from projections.tool_state import evolve_active_profile, evolve_scratchpad, evolve_todo
from tests.projections.logs import records, session_logs

BOOKKEEPING = st.sampled_from(
    [
        NoteSaved(note_id="n1", text="milk"),
        NoteSaved(note_id="n2", text="eggs"),
        NoteDeleted(note_id="n1"),
        SessionPinned(pinned=True),
        SessionPinned(pinned=False),
    ]
)


@st.composite
def logs_with_bookkeeping(draw: Any) -> list[Event]:
    """A session log with notes and pins sprinkled in (legal in every run state), and
    sometimes a deletion at the end."""
    events = list(draw(session_logs(max_turns=3)))
    for extra in draw(st.lists(BOOKKEEPING, max_size=6)):
        events.insert(draw(st.integers(1, len(events))), extra)
    if draw(st.booleans()):
        events.append(SessionDeleted())
    return events


@settings(max_examples=120, deadline=None)
@given(logs_with_bookkeeping())
def test_every_part_equals_its_projection_after_every_record(events: list[Event]) -> None:
    state = SessionState()
    context = context_projection.INITIAL
    progress = run_progress.INITIAL
    todo: Any = ()
    scratchpad: Any = ()
    profile = state.profile
    notes: dict[str, str] = {}
    pinned = deleted = False
    for record in records(events):
        state.apply(record)
        context = context_projection.evolve(context, record)
        progress = run_progress.evolve(progress, record)
        todo = evolve_todo(todo, record)
        scratchpad = evolve_scratchpad(scratchpad, record)
        profile = evolve_active_profile(profile, record)
        event = record.event
        if isinstance(event, NoteSaved):
            notes[event.note_id] = event.text
        elif isinstance(event, NoteDeleted):
            notes.pop(event.note_id, None)
        elif isinstance(event, SessionPinned):
            pinned = event.pinned
        elif isinstance(event, SessionDeleted):
            deleted = True
        assert state.context == context
        assert state.progress == progress
        assert state.todo_items == todo
        assert state.scratchpad_sections == scratchpad
        assert state.profile == profile
        assert (state.notes_by_id, state.pinned, state.deleted) == (notes, pinned, deleted)
        assert state.last_seq == record.seq


def test_no_event_type_is_routed_to_both_the_progress_and_the_session_fields() -> None:
    progress = set(session_state._PROGRESS)
    assert not progress & session_state._OWN
    assert set(EVENT_TYPES.values()) >= (progress | session_state._OWN)
