from __future__ import annotations

from events.types import (
    ProfileSwitched,
    ScratchpadUpdated,
    SessionCreated,
    TodoItem,
    TodoUpdated,
    UserMessage,
)
from projections.fold import fold
from projections.tool_state import ACTIVE_PROFILE, SCRATCHPAD, TODO, ActiveProfile
from tests.projections.logs import records


def test_todo_is_the_last_list() -> None:
    first = (TodoItem(id=1, text="search"), TodoItem(id=2, text="answer"))
    second = (TodoItem(id=1, text="search", status="done"), TodoItem(id=2, text="answer"))
    log = records([TodoUpdated(items=first), UserMessage(text="x"), TodoUpdated(items=second)])
    assert fold(TODO, log[:2]) == first
    assert fold(TODO, log) == second
    assert fold(TODO, []) == ()


def test_scratchpad_sections() -> None:
    log = records(
        [
            ScratchpadUpdated(section="plan", content="a"),
            ScratchpadUpdated(section="notes", content="b"),
            ScratchpadUpdated(section="plan", content="a2"),
            ScratchpadUpdated(section="notes", content=None),
            ScratchpadUpdated(section="gone", content=None),
        ]
    )
    assert fold(SCRATCHPAD, log[:3]) == (("plan", "a2"), ("notes", "b"))
    assert fold(SCRATCHPAD, log) == (("plan", "a2"),)


def test_active_profile() -> None:
    log = records(
        [
            SessionCreated(profile_id="secretary"),
            ProfileSwitched(profile_id="coder", profile_name="Coder"),
        ]
    )
    assert fold(ACTIVE_PROFILE, []) == ActiveProfile()
    assert fold(ACTIVE_PROFILE, log[:1]) == ActiveProfile(profile_id="secretary")
    assert fold(ACTIVE_PROFILE, log) == ActiveProfile(profile_id="coder", profile_name="Coder")
