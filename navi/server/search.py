"""Searching a user's chats for text: titles and previews first, then what was said —
every user and assistant message of the ``messages`` projection, folded per session on
request (personal use: tens to a few thousand sessions; the client waits for a pause in
typing before it asks).

Each hit carries ``match``: the words around the first place the text was found, for the
sidebar to show under the title.
"""

from __future__ import annotations

import msgspec

from events.store import EventStore
from navi.server.auth import User
from navi.server.views import SessionsView, load_log
from navi.session.errors import SessionDamaged
from projections.sessions import SessionSummary

SNIPPET_CHARS = 120
_SAID = ("user", "assistant")


class Hit(msgspec.Struct, frozen=True, kw_only=True):
    summary: SessionSummary
    match: str  # the found text in its context, one line


def snippet(text: str, needle: str) -> str:
    """The text around the first ``needle`` (lower case), on one line, cut to fit."""
    flat = " ".join(text.split())
    at = flat.lower().find(needle)
    if at < 0:
        return flat[:SNIPPET_CHARS]
    start = max(0, at - (SNIPPET_CHARS - len(needle)) // 2)
    end = min(len(flat), start + SNIPPET_CHARS)
    start = max(0, end - SNIPPET_CHARS)
    return ("…" if start else "") + flat[start:end].strip() + ("…" if end < len(flat) else "")


async def search_sessions(
    sessions: SessionsView, store: EventStore, user: User, query: str
) -> list[Hit]:
    """The user's sessions whose title or any message holds ``query`` (case-insensitive),
    in the listing's order."""
    needle = " ".join(query.lower().split())
    hits = []
    for summary in await sessions.listing(user):
        for text in (summary.title, summary.preview):
            if needle in " ".join(text.lower().split()):
                hits.append(Hit(summary=summary, match=snippet(text, needle)))
                break
        else:
            found = await _in_messages(store, summary.session_id, needle)
            if found is not None:
                hits.append(Hit(summary=summary, match=found))
    return hits


async def _in_messages(store: EventStore, session_id: str, needle: str) -> str | None:
    try:
        messages = (await load_log(store, session_id)).messages()
    except SessionDamaged:
        return None  # the list marks it; its text cannot be searched
    for message in messages:
        if message.role in _SAID and needle in " ".join(message.content.lower().split()):
            return snippet(message.content, needle)
    return None
