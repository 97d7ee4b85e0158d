"""Read models the server answers from: the session list (kept up to date from the
global log) and one session's projections (folded from its log on request)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
from msgspec.structs import replace

from events.base import BaseEventStore
from events.envelope import Recorded
from navi.replay.history import History, read_history
from navi.run.state import ACTIVE_STATES, state_at
from navi.server.auth import User
from navi.session.errors import SessionNotFound
from projections import messages as messages_projection
from projections import sessions as sessions_projection
from projections.context import CONTEXT, ContextState
from projections.fold import fold
from projections.runner import LogProjectionRunner
from projections.sessions import SessionSummary
from projections.types import Message


class SessionsView:
    def __init__(self, store: BaseEventStore) -> None:
        self.store = store
        self._runner = LogProjectionRunner(store, sessions_projection.SESSIONS)
        self._lock = anyio.Lock()

    async def refresh(self) -> sessions_projection.SessionsState:
        async with self._lock:
            return await self._runner.catch_up()

    async def listing(self, user: User, query: str = "") -> list[SessionSummary]:
        state = await self.refresh()
        mine = [s for s in state.listing() if s.user_id == user.id]
        if query:
            needle = query.lower()
            mine = [s for s in mine if needle in s.title.lower() or needle in s.preview.lower()]
        return mine

    async def get(self, session_id: str, user: User) -> SessionSummary:
        """The session, if it exists, is not deleted and belongs to ``user``."""
        state = await self.refresh()
        summary = state.get(session_id)
        if summary is None or summary.deleted or summary.user_id != user.id:
            raise SessionNotFound(session_id)
        return summary


class SessionLog:
    """One session's log and its projections, as of now."""

    def __init__(self, records: list[Recorded]) -> None:
        self.records = records

    @property
    def last_seq(self) -> int:
        return self.records[-1].seq if self.records else 0

    def messages(self) -> list[Message]:
        return fold(messages_projection.MESSAGES, self.records).messages()

    def context(self) -> ContextState:
        return fold(CONTEXT, self.records)

    def run_active(self) -> bool:
        return state_at(self.records) in ACTIVE_STATES


async def load_log(store: BaseEventStore, session_id: str) -> SessionLog:
    """The session's history: a fork's starts with its origin's events up to the fork
    point (navi/replay/history.py); seqs are history seqs, as clients see them."""
    return SessionLog(await read_history(store, session_id))


async def follow_history(
    store: BaseEventStore, history: History, after: int
) -> AsyncIterator[Recorded]:
    """The session's history after seq ``after``, then live, numbered as the history
    (a fork's own stream is followed, its seqs shifted by ``history.offset``)."""
    if history.is_fork:
        link = history.to_history_seq(1)  # the fork point: the origin's part ends here
        if after < link:
            for record in await history.read(after_seq=after, to_seq=link):
                yield record
            after = link
    offset = history.offset
    stored_after = history.to_stored_seq(after)
    async for record in store.subscribe(history.session_id, after_seq=stored_after):
        yield record if offset == 0 else replace(record, seq=record.seq + offset)
