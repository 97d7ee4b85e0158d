"""Tiny projections of one session's tool state: the todo list, the scratchpad, the profile."""

from __future__ import annotations

import msgspec

from events.envelope import Recorded
from events.types import (
    ProfileSwitched,
    ScratchpadUpdated,
    SessionCreated,
    TodoItem,
    TodoUpdated,
)
from projections.fold import Projection

# ---------------------------------------------------------------- todo

TodoState = tuple[TodoItem, ...]


def evolve_todo(state: TodoState, record: Recorded) -> TodoState:
    """``todo.updated`` carries the whole new list."""
    event = record.event
    return event.items if isinstance(event, TodoUpdated) else state


TODO: Projection[TodoState] = Projection("todo", (), evolve_todo)

# ---------------------------------------------------------------- scratchpad

# (section, content) pairs in the order the sections were first written.
ScratchpadState = tuple[tuple[str, str], ...]


def evolve_scratchpad(state: ScratchpadState, record: Recorded) -> ScratchpadState:
    """``scratchpad.updated`` replaces one section's content; ``None`` content clears it."""
    event = record.event
    if not isinstance(event, ScratchpadUpdated):
        return state
    others = tuple(pair for pair in state if pair[0] != event.section)
    if event.content is None:
        return others
    if len(others) == len(state):
        return (*state, (event.section, event.content))
    return tuple(
        (section, event.content if section == event.section else content)
        for section, content in state
    )


SCRATCHPAD: Projection[ScratchpadState] = Projection("scratchpad", (), evolve_scratchpad)

# ---------------------------------------------------------------- active profile


class ActiveProfile(msgspec.Struct, frozen=True, kw_only=True):
    profile_id: str | None = None  # None before session.created
    profile_name: str = ""  # known only after a profile.switched


def evolve_active_profile(state: ActiveProfile, record: Recorded) -> ActiveProfile:
    event = record.event
    if isinstance(event, SessionCreated):
        return ActiveProfile(profile_id=event.profile_id)
    if isinstance(event, ProfileSwitched):
        return ActiveProfile(profile_id=event.profile_id, profile_name=event.profile_name)
    return state


ACTIVE_PROFILE: Projection[ActiveProfile] = Projection(
    "active_profile", ActiveProfile(), evolve_active_profile
)
