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

from events.envelope import Recorded
from events.errors import EventDecodeError
from events.store import EventStore
from navi.ids import is_uuid
from navi.run.state import ACTIVE_STATES, RunState, state_at
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
    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._runner = LogProjectionRunner(store, sessions_projection.SESSIONS)
        self._lock = anyio.Lock()
        self._creating: dict[str, anyio.Lock] = {}  # user id → held while making one
        # Streams an import is writing: no refresh reads them (ImportedSessions).
        self._importing: set[str] = set()

    def reset(self) -> None:
        """Fold the list again from the log at the next refresh (after an import that
        failed part way, whose streams were skipped)."""
        self._runner = LogProjectionRunner(self.store, sessions_projection.SESSIONS)

    async def refresh(self) -> sessions_projection.SessionsState:
        async with self._lock:
            before = self._runner.state.damaged
            state = await self._runner.catch_up(skip=self._importing)
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

    def importing(self) -> ImportedSessions:
        """What an import tells, to take its sessions into the list without reading them
        back from the log (``ImportedSessions``)."""
        return ImportedSessions(self)

    async def adopt(self, part: sessions_projection.SessionsState, records: list[Recorded]) -> None:
        """Take new streams' records, just committed and skipped by every refresh since,
        with ``part`` their fold on its own, into the list (``ImportedSessions``)."""
        async with self._lock:
            # Everything else up to them (committed before them, so readable now) first.
            await self._runner.catch_up(skip=self._importing)
            state = sessions_projection.merged(self._runner.state, part)
            self._runner.adopt(state, sorted(records, key=lambda r: r.position))
            self._importing -= {r.stream_id for r in records}

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

    async def owned(self, session_id: str, user: User) -> SessionSummary:
        """The session if ``user`` owns it, deleted or not (the caller looks at its log):
        from the list as it is, read again only when it does not hold the session yet,
        since an owner never changes. A socket's way in: a ``refresh`` reads the whole
        log's news under one lock, and a thousand sockets opening under load waited for
        it in turn, their pongs unread meanwhile (closed by the keep-alive)."""
        if not is_uuid(session_id):
            raise SessionNotFound(session_id)
        summary = self._runner.state.get(session_id)
        if summary is None:
            summary = (await self.refresh()).get(session_id)
        if summary is None or summary.user_id != user.id:
            raise SessionNotFound(session_id)
        return summary

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
        return self.run_state() in ACTIVE_STATES

    def run_state(self) -> RunState:
        """Where the run is (``waiting_for_llm``: its model's server is away)."""
        with self._damage():
            return state_at(self.records)

    @contextmanager
    def _damage(self) -> Iterator[None]:
        try:
            yield
        except (ValueError, OverflowError, OSError) as exc:
            # A time out of the calendar's range, a value no handler expects.
            raise SessionDamaged(
                self.session_id, f"its log holds a damaged event ({exc})"
            ) from None


async def load_log(store: EventStore, session_id: str) -> SessionLog:
    """The session's stream (a fork's holds a copy of its origin's events up to the
    fork point: navi/replay/fork.py)."""
    if not is_uuid(session_id):
        raise SessionNotFound(session_id)
    try:
        records = await store.read(session_id)
    except EventDecodeError as exc:
        raise SessionDamaged(session_id, exc.reason) from None
    if not records:
        raise SessionNotFound(session_id)
    return SessionLog(records, session_id)


class ImportedSessions:
    """Takes an import's streams into the session list as it writes them. Read back from
    the log, they would hold up the next request of every user until all were read and
    decoded again (seconds for 150,000 events). Instead, before they are written, they
    are folded on their own in a worker thread (each stream's summary depends on its
    own events) and every refresh skips them; once written, they are merged.

    ``settle()`` (always, once the import is over) undoes it for an import that failed
    part way: the list is then folded again from the log, as at start-up."""

    def __init__(self, view: SessionsView) -> None:
        self.view = view
        self.streams: set[str] = set()
        self.part: sessions_projection.SessionsState | None = None
        self.adopted = False

    async def will_write(self, streams: list[list[Recorded]]) -> None:
        records = [r for stream in streams for r in stream]
        self.part = await anyio.to_thread.run_sync(fold, sessions_projection.SESSIONS, records)
        self.streams = {stream[0].stream_id for stream in streams if stream}
        self.view._importing |= self.streams

    async def written(self, records: list[Recorded]) -> None:
        assert self.part is not None, "will_write comes first"
        await self.view.adopt(self.part, records)
        self.adopted = True

    def settle(self) -> None:
        if self.streams and not self.adopted:
            self.view._importing -= self.streams
            self.view.reset()
