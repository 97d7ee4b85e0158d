"""Read models the server answers from: the session list (kept up to date from the
global log) and one session's projections (folded from its log on request).

``SessionsView.get`` is where every route and socket that names a session in its path
finds it: an id that is not a UUID, another user's session or a deleted one are all
"not found" (404 / 4004), before the id reaches a stream name or a folder.
A session whose log holds an event its projections cannot take answers
``SessionDamaged`` (500, a plain message) on its own routes; the list marks it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import structlog

from events.base import BaseEventStore
from events.envelope import Recorded
from events.errors import EventDecodeError
from navi.ids import is_uuid
from navi.replay.history import read_history
from navi.run.state import ACTIVE_STATES, state_at
from navi.server.auth import User
from navi.session.errors import SessionDamaged, SessionNotFound, TooManySessions
from projections import messages as messages_projection
from projections import sessions as sessions_projection
from projections.context import CONTEXT, ContextState
from projections.fold import fold
from projections.runner import LogProjectionRunner
from projections.sessions import SessionSummary
from projections.types import Message

log = structlog.get_logger(__name__)


class SessionsView:
    def __init__(self, store: BaseEventStore) -> None:
        self.store = store
        self._runner = LogProjectionRunner(store, sessions_projection.SESSIONS)
        self._lock = anyio.Lock()
        self._creating: dict[str, anyio.Lock] = {}  # user id → held while making one

    async def refresh(self) -> sessions_projection.SessionsState:
        async with self._lock:
            before = self._runner.state.damaged
            state = await self._runner.catch_up()
            for session_id in state.damaged - before:
                error = state.entries[session_id].summary.error
                log.warning("session.damaged", session_id=session_id, error=error)
            return state

    async def listing(self, user: User, query: str = "") -> list[SessionSummary]:
        state = await self.refresh()
        # A stream named otherwise than by a UUID is no session (it could only have
        # been written around the routes, which refuse it): never listed.
        mine = [s for s in state.listing_of(user.id) if is_uuid(s.session_id)]
        if query:
            needle = query.lower()
            mine = [s for s in mine if needle in s.title.lower() or needle in s.preview.lower()]
        return mine

    @asynccontextmanager
    async def room_for(self, user: User, limit: int) -> AsyncIterator[None]:
        """Make one session of ``user``'s inside: raises ``TooManySessions`` (nothing
        made) when they have ``limit`` sessions already (0: no limit). The user's
        sessions are made one at a time, so two at once cannot both take the last place;
        other users' are not held up."""
        lock = self._creating.setdefault(user.id, anyio.Lock())
        async with lock:
            if limit and (await self.refresh()).count_of(user.id) >= limit:
                log.info("sessions.limit_reached", user_id=user.id, limit=limit)
                raise TooManySessions(limit)
            yield

    async def get(self, session_id: str, user: User, *, admin_too: bool = False) -> SessionSummary:
        """The session, if it exists, is not deleted and belongs to ``user`` (or, with
        ``admin_too``, ``user`` is an admin: who may decide a waiting tool call); an id
        that is not a UUID is not found, whatever the log holds."""
        if not is_uuid(session_id):
            raise SessionNotFound(session_id)
        state = await self.refresh()
        summary = state.get(session_id)
        owner = summary is not None and (
            summary.user_id == user.id or (admin_too and user.role == "admin")
        )
        if summary is None or summary.deleted or not owner:
            raise SessionNotFound(session_id)
        return summary


class SessionLog:
    """One session's log and its projections, as of now; a projection that cannot take
    one of its events raises ``SessionDamaged``."""

    def __init__(self, records: list[Recorded], session_id: str = "") -> None:
        self.records = records
        self.session_id = session_id or (records[0].stream_id if records else "")

    @property
    def last_seq(self) -> int:
        return self.records[-1].seq if self.records else 0

    def messages(self) -> list[Message]:
        with self._damage():
            return fold(messages_projection.MESSAGES, self.records).messages()

    def context(self) -> ContextState:
        with self._damage():
            return fold(CONTEXT, self.records)

    def run_active(self) -> bool:
        with self._damage():
            return state_at(self.records) in ACTIVE_STATES

    @contextmanager
    def _damage(self) -> Iterator[None]:
        try:
            yield
        except (ValueError, OverflowError, OSError) as exc:
            # A time out of the calendar's range, a value no handler expects.
            raise SessionDamaged(
                self.session_id, f"its log holds a damaged event ({exc})"
            ) from None


async def load_log(store: BaseEventStore, session_id: str) -> SessionLog:
    """The session's history: a fork's starts with its origin's events up to the fork
    point (navi/replay/history.py); seqs are history seqs, as clients see them."""
    if not is_uuid(session_id):
        raise SessionNotFound(session_id)
    try:
        return SessionLog(await read_history(store, session_id), session_id)
    except EventDecodeError as exc:
        raise SessionDamaged(session_id, exc.reason) from None
