"""The periodic sweeps that keep every run going.

``Sweeper`` (several nodes on PostgreSQL), every ``interval`` on every node:

1. sessions this node owns whose log shows an unfinished run have their actor started —
   a no-op while it lives; its recovery continues the run (navi/session/actor.py
   ``on_start``) if it had stopped;
2. sessions with an unfinished run, or with inbox rows waiting, that *no* node owns
   (their owner died: PostgreSQL dropped its locks with its connection) are taken
   over: claimed, resumed by the resume rules, their inbox delivered. A session must be
   seen free by two sweeps in a row, so that a node reconnecting after a database
   restart takes its own sessions back before anyone else does;
3. sessions idle here for ``idle_release_s`` are let go (their actor stopped, then the
   lock released), so a node never holds more locks than it has live sessions;
4. old finished inbox rows are deleted.

On one node (any store) there is no sweep: a session actor that fails is restarted
with a growing back-off (navi/session/manager.py ``SUPERVISION``), and its recovery
continues the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import structlog

from events.store import EventStore
from navi.cluster.inbox import Inbox, RunIndex
from navi.cluster.local import LocalSessions
from navi.cluster.ownership import ClusterUnavailable, PostgresOwnership

log = structlog.get_logger(__name__)

PRUNE_EVERY_S = 300.0
KEEP_DONE_ROWS_S = 3600.0


class Sweeper:
    def __init__(
        self,
        store: EventStore,
        inbox: Inbox,
        runs: RunIndex,
        ownership: PostgresOwnership,
        sessions: LocalSessions,
        *,
        on_claimed: Callable[[], None],
        interval: float,
        idle_release_s: float,
    ) -> None:
        self.store = store
        self.inbox = inbox
        self.runs = runs
        self.ownership = ownership
        self.sessions = sessions
        # Called after a takeover: the claimed sessions' inbox rows are to be delivered.
        self.on_claimed = on_claimed
        self.interval = interval
        self.idle_release_s = idle_release_s
        self.takeovers = 0
        self._free_before: set[str] = set()
        self._subagent: dict[str, bool] = {}
        self._pruned_at = 0.0

    async def run(self) -> None:
        while True:
            await anyio.sleep(self.interval)
            try:
                await self.sweep()
            except ClusterUnavailable:
                pass
            except Exception as exc:  # the database is restarting, …: next time
                log.warning("cluster.sweep_failed", error=str(exc))

    async def sweep(self) -> None:
        ownership = self.ownership
        open_runs = await self.runs.open_runs()
        waiting = await self.inbox.waiting_sessions(older_than_s=self.interval)
        candidates = {s for s in open_runs.keys() | waiting if not await self._is_subagent(s)}
        held = ownership.held
        for session_id in sorted(candidates & held & open_runs.keys()):
            await self._resume(session_id)
        others = candidates - held
        free = others - await ownership.locked(others)
        ready, self._free_before = free & self._free_before, free - self._free_before
        if ready:
            claimed = await ownership.claim(ready)
            for session_id in sorted(claimed):
                self.takeovers += 1
                log.warning("cluster.takeover", node=ownership.node_id, session_id=session_id)
                if session_id in open_runs:
                    await self._resume(session_id)
            self.on_claimed()
        await self._release_idle(open_runs.keys() | waiting)
        now = time.monotonic()
        if now - self._pruned_at > PRUNE_EVERY_S:
            self._pruned_at = now
            await self.inbox.prune(KEEP_DONE_ROWS_S)

    async def _resume(self, session_id: str) -> None:
        try:
            if await self.sessions.start_here(session_id):
                node = self.ownership.node_id
                log.warning("run.resumed_by_sweep", node=node, session_id=session_id)
        except Exception as exc:
            log.warning("run.resume_failed", session_id=session_id, error=str(exc))

    async def _is_subagent(self, session_id: str) -> bool:
        """A subagent's session runs under its parent's actor: never taken on its own."""
        known = self._subagent.get(session_id)
        if known is None:
            first = await self.store.read(session_id, to_seq=1)
            created = first[0].event if first else None
            known = getattr(created, "parent_call_id", None) is not None
            if first:
                self._subagent[session_id] = known
        return known

    async def _release_idle(self, busy: set[str]) -> None:
        now = time.monotonic()
        for session_id in sorted(self.ownership.held - busy):
            if self.sessions.idle_for(session_id, now) > self.idle_release_s:
                await self.sessions.release(session_id)
