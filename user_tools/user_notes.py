"""User tool (module format): personal notes that persist, kept as events in the log.

``execute`` takes ``(params, ctx)``: it records ``note.saved`` / ``note.deleted`` with
``ctx.emit`` and reads the current notes from ``ctx.state.notes()``.
"""

from __future__ import annotations

import uuid

from events.types import NoteDeleted, NoteSaved

name = "user_notes"
description = (
    "The user's personal notes, kept across sessions. 'save' stores a note (give 'id' to "
    "replace one), 'list' shows all notes, 'search' finds notes containing 'query', "
    "'delete' removes the note with 'id'."
)
parameters = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["save", "list", "search", "delete"]},
        "text": {"type": "string", "description": "save: the note's text."},
        "id": {"type": "string", "description": "save (to replace) / delete: the note id."},
        "query": {"type": "string", "description": "search: words to look for."},
    },
    "required": ["action"],
}
MAX_NOTE_CHARS = 10_000


def _format(notes: dict) -> str:
    return "\n".join(f"- [{note_id}] {text}" for note_id, text in notes.items())


async def execute(params: dict, ctx) -> str:
    action = params["action"]
    notes = dict(ctx.state.notes())
    if action == "save":
        text = (params.get("text") or "").strip()
        if not text:
            raise ValueError("'save' needs a non-empty 'text'")
        if len(text) > MAX_NOTE_CHARS:
            raise ValueError(f"a note holds at most {MAX_NOTE_CHARS} characters")
        note_id = params.get("id") or uuid.uuid4().hex[:8]
        await ctx.emit(NoteSaved(note_id=note_id, text=text))
        verb = "Updated" if note_id in notes else "Saved"
        return f"{verb} note [{note_id}]."
    if action == "delete":
        note_id = params.get("id")
        if not note_id:
            raise ValueError("'delete' needs the note's 'id' (see 'list')")
        if note_id not in notes:
            raise ValueError(f"no note [{note_id}]; existing ids: {', '.join(notes) or 'none'}")
        await ctx.emit(NoteDeleted(note_id=note_id))
        return f"Deleted note [{note_id}]."
    if action == "search":
        words = (params.get("query") or "").lower().split()
        if not words:
            raise ValueError("'search' needs a 'query'")
        found = {k: v for k, v in notes.items() if all(w in v.lower() for w in words)}
        return _format(found) if found else f"No note matches {params['query']!r}."
    return _format(notes) if notes else "No notes yet."
