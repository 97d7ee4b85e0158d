"""The owner's side of the inbox: hand each pending row of its sessions to the actor.

Rows of one session go in order. A message goes to the actor only when it can run:
a queued message waits in the inbox (accepted, so its sender has answered) while the
session's run goes on, which keeps it durable until its own run is in the log. Before
a message is handed over, the log is asked whether its run (id = the row's id) is
there already: a row delivered by an owner that died before marking it is not run
twice. A failure that is not a refusal leaves the row pending for the next round.
"""

from __future__ import annotations

import anyio
import structlog

from events.postgres import is_disconnect
from navi.cluster.inbox import Inbox, InboxRow, RunIndex
from navi.cluster.local import LocalSessions
from navi.cluster.ownership import ClusterUnavailable, PostgresOwnership
from navi.cluster.requests import answer, ask_message, refusal, send_message
from navi.session import messages as m
from navi.session.errors import SessionError

log = structlog.get_logger(__name__)


class InboxDelivery:
    def __init__(
        self,
        inbox: Inbox,
        runs: RunIndex,
        ownership: PostgresOwnership,
        sessions: LocalSessions,
        *,
        poll_s: float = 0.5,
    ) -> None:
        self.inbox = inbox
        self.runs = runs
        self.ownership = ownership
        self.sessions = sessions
        self.poll_s = poll_s
        self._wake = anyio.Event()
        # Messages the actor holds in its in-memory queue: their rows are done once
        # their run is in the log.
        self._queued: set[str] = set()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            self._wake = anyio.Event()
            try:
                await self.deliver_pending()
            except ClusterUnavailable:
                pass  # reconnecting; the rows wait in the database
            except Exception as exc:
                if is_disconnect(exc):  # the database is restarting: the next round
                    log.warning("inbox.delivery_failed", error=str(exc))
                else:
                    log.warning("inbox.delivery_failed", error=str(exc), exc_info=exc)
            with anyio.move_on_after(self.poll_s):
                await self._wake.wait()

    async def deliver_pending(self) -> None:
        rows = await self.inbox.pending(sorted(self.ownership.held))
        by_session: dict[str, list[InboxRow]] = {}
        for row in rows:
            by_session.setdefault(row.session_id, []).append(row)
        for session_id, session_rows in by_session.items():
            async with self.sessions.holding(session_id) as here:
                if here:
                    await self._deliver_session(session_id, session_rows)

    async def _deliver_session(self, session_id: str, rows: list[InboxRow]) -> None:
        sends_wait = False
        for row in rows:
            try:
                if row.kind == "send":
                    if not sends_wait:
                        sends_wait = await self._deliver_send(row)
                elif row.kind == "stop":
                    await self._deliver_stop(row)
                else:
                    await self._deliver_ask(row)
            except SessionError as exc:
                await self.inbox.finish(row.id, refusal(exc))
            except ClusterUnavailable:
                raise
            except Exception as exc:  # an actor crash, a timeout: the next round tries again
                log.warning("inbox.row_failed", session_id=session_id, row=row.id, error=str(exc))
                if row.kind == "send":
                    sends_wait = True

    async def _deliver_send(self, row: InboxRow) -> bool:
        """Hand a message over; True if the session's later messages must wait."""
        session_id = row.session_id
        first = await self.runs.first_seq_of_run(session_id, row.id)
        if first is not None:  # its run is in the log: delivered before
            self._queued.discard(row.id)
            result = row.result if isinstance(row.result, dict) else {}
            await self.inbox.finish(row.id, {"after_seq": first - 1, "queued": False, **result})
            return False
        if row.id in self._queued:
            return True  # in the actor's queue; its run has not started yet
        # A message accepted before (by this owner or a dead one) is never refused now.
        queue = bool(row.payload.get("queue")) or row.accepted_at is not None
        if queue and await self.runs.active_run(session_id) is not None:
            if row.accepted_at is None:
                after = await self.runs.last_seq(session_id)
                await self.inbox.accept(row.id, {"after_seq": after, "queued": True})
            return True
        message = send_message(row.payload, run_id=row.id, queue=queue)
        reply: m.RunStartedReply = await self.sessions.ask_here(session_id, message)
        result = {"after_seq": reply.after_seq, "queued": reply.queued}
        if reply.queued:
            self._queued.add(row.id)
            await self.inbox.accept(row.id, result)
            return True
        await self.inbox.finish(row.id, result)
        return False

    async def _deliver_stop(self, row: InboxRow) -> None:
        run_id = row.payload.get("run_id")
        if run_id and await self.runs.run_ended(row.session_id, str(run_id)):
            await self.inbox.finish(row.id, False)
            return
        reason = str(row.payload.get("reason") or "user")
        stopped = await self.sessions.ask_here(row.session_id, m.StopRun(reason=reason))
        await self.inbox.finish(row.id, bool(stopped))

    async def _deliver_ask(self, row: InboxRow) -> None:
        reply = await self.sessions.ask_here(row.session_id, ask_message(row.payload))
        await self.inbox.finish(row.id, {"value": answer(reply)})
