"""Session tool state as a fold over its events: todo items, scratchpad sections, notes.

Navi's projections keep the real state; this small fold serves tests, ephemeral runs
and anyone who wants the tool-state view of a list of events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from events.types import Event, NoteDeleted, NoteSaved, ScratchpadUpdated, TodoItem, TodoUpdated


class InMemoryToolState:
    def __init__(self) -> None:
        self._todo: tuple[TodoItem, ...] = ()
        self._scratchpad: dict[str, str] = {}
        self._notes: dict[str, str] = {}
        self.events: list[Event] = []

    @classmethod
    def from_events(cls, events: Iterable[Event]) -> InMemoryToolState:
        state = cls()
        for event in events:
            state.apply(event)
        return state

    def apply(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, TodoUpdated):
            self._todo = event.items
        elif isinstance(event, ScratchpadUpdated):
            if event.content is None:
                self._scratchpad.pop(event.section, None)
            else:
                self._scratchpad[event.section] = event.content
        elif isinstance(event, NoteSaved):
            self._notes[event.note_id] = event.text
        elif isinstance(event, NoteDeleted):
            self._notes.pop(event.note_id, None)

    async def apply_async(self, event: Event) -> None:
        self.apply(event)

    def todo(self) -> Sequence[TodoItem]:
        return self._todo

    def scratchpad(self) -> Mapping[str, str]:
        return dict(self._scratchpad)

    def notes(self) -> Mapping[str, str]:
        return dict(self._notes)
