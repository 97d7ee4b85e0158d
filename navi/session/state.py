"""The session actor's working state: every projection it decides on, folded together.

Each part is a pure projection; ``SessionState.apply`` folds one record into all of
them and checks the run state machine first, so an illegal event changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from events.envelope import Recorded
from events.types import (
    NoteDeleted,
    NoteSaved,
    ProfileSwitched,
    ScratchpadUpdated,
    SessionCreated,
    SessionDeleted,
    SessionModelChosen,
    SessionPinned,
    TodoItem,
    TodoUpdated,
)
from navi.run import progress as run_progress
from navi.run.state import ACTIVE_STATES, RunState, transition
from projections import consent as consent_projection
from projections import context as context_projection
from projections.sessions import copied_to
from projections.tool_state import (
    ActiveProfile,
    evolve_active_profile,
    evolve_scratchpad,
    evolve_todo,
)

_PROGRESS = run_progress.FOLDS
_CONSENT = consent_projection.TYPES
_OWN = frozenset(
    {
        SessionCreated,
        SessionDeleted,
        SessionPinned,
        SessionModelChosen,
        NoteSaved,
        NoteDeleted,
        ScratchpadUpdated,
        ProfileSwitched,
    }
)


class SessionState:
    def __init__(self) -> None:
        self.last_seq = 0
        self.run_state: RunState = RunState.IDLE
        self.context = context_projection.INITIAL
        self.todo_items: tuple[TodoItem, ...] = ()
        self.scratchpad_sections: tuple[tuple[str, str], ...] = ()
        self.notes_by_id: dict[str, str] = {}
        self.profile = ActiveProfile()
        self.progress = run_progress.INITIAL
        # Where the chat's web requests may go without asking (projections/consent.py).
        self.consent = consent_projection.INITIAL
        self.created: SessionCreated | None = None
        self.copied_to = 0  # a fork's seqs 2..copied_to are its origin's events
        self.deleted = False
        self.pinned = False
        self.chosen_model = ""  # the chat's model picker; "": the profile's
        self.last_timestamp = 0.0

    def check(self, record: Recorded) -> RunState:
        """The run state after ``record``; raises ``IllegalTransition`` if not allowed."""
        return transition(self.run_state, record.event)

    def apply(self, record: Recorded, run_state: RunState | None = None) -> None:
        """Fold ``record`` in. ``run_state``: the state after it, when the caller has just
        checked the transition itself (it is not checked twice)."""
        self.run_state = self.check(record) if run_state is None else run_state
        self.last_seq = record.seq
        self.last_timestamp = record.timestamp
        event = record.event
        self.context = context_projection.evolve(self.context, record)
        # Each other part is folded only for the event types that change it: a run
        # applies five events per iteration, none of which most parts care about.
        cls = type(event)
        if cls in _CONSENT:
            self.consent = consent_projection.evolve(self.consent, event)
        fold = _PROGRESS.get(cls)
        if fold is not None:
            self.progress = fold(self.progress, record, event)
            if cls is TodoUpdated:
                self.todo_items = evolve_todo(self.todo_items, record)
        elif cls in _OWN:
            self._apply_own(record)

    def _apply_own(self, record: Recorded) -> None:
        """The events that change the session's own fields and tool state (none of them
        changes the run's progress)."""
        event = record.event
        if isinstance(event, SessionCreated):
            self.created = event
            self.copied_to = copied_to(event)
        elif isinstance(event, SessionDeleted | SessionPinned) and record.seq <= self.copied_to:
            pass  # the origin's, not this fork's (projections/sessions.py)
        elif isinstance(event, SessionDeleted):
            self.deleted = True
        elif isinstance(event, SessionPinned):
            self.pinned = event.pinned
        elif isinstance(event, SessionModelChosen):
            self.chosen_model = event.model
        elif isinstance(event, NoteSaved):
            self.notes_by_id[event.note_id] = event.text
        elif isinstance(event, NoteDeleted):
            self.notes_by_id.pop(event.note_id, None)
        self.scratchpad_sections = evolve_scratchpad(self.scratchpad_sections, record)
        self.profile = evolve_active_profile(self.profile, record)

    # -- what tools read (tools.context.SessionToolState)

    def todo(self) -> Sequence[TodoItem]:
        return self.todo_items

    def scratchpad(self) -> Mapping[str, str]:
        return dict(self.scratchpad_sections)

    def notes(self) -> Mapping[str, str]:
        return dict(self.notes_by_id)

    @property
    def user_id(self) -> str:
        return self.created.user_id if self.created else "local"

    @property
    def run_active(self) -> bool:
        return self.run_state in ACTIVE_STATES
