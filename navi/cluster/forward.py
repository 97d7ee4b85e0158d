"""What a node does with a request for a session another node owns: it writes the
request into the durable inbox and answers its client as the owner would.

- A message is answered once the owner's actor accepted it (a run started, or it was
  queued) or refused it. If the owner does not answer within ``accept_wait_s`` (it is
  busy, or it died: the next owner delivers the row) the message is still accepted,
  as queued, since it is durable: its run will start.
- A stop is sent only if the log shows a run; it names that run, so a stop delivered
  late never stops a later run.
- The other requests (``ASKABLE``) wait for the owner's answer.
"""

from __future__ import annotations

import uuid
from typing import Any

import anyio

from navi.cluster.inbox import Inbox, InboxRow, RunIndex
from navi.cluster.ownership import ClusterUnavailable
from navi.cluster.requests import ASKABLE, ask_payload, raise_refusal, send_payload
from navi.session import messages as m
from navi.session.errors import SessionError, SessionNotFound
from navi.session.input import check_files, check_text, clean_images

POLL_S = 0.25  # how often a waiting sender looks at its row if no notification comes


class Forwarder:
    def __init__(self, inbox: Inbox, runs: RunIndex, *, accept_wait_s: float = 5.0) -> None:
        self.inbox = inbox
        self.runs = runs
        self.accept_wait_s = accept_wait_s
        # Senders waiting for their row, woken by the owner's "done" notification.
        self._waiters: dict[str, anyio.Event] = {}

    def row_done(self, row_id: str) -> None:
        """The owner finished (or accepted) this row: wake its sender."""
        waiter = self._waiters.get(row_id)
        if waiter is not None:
            waiter.set()

    async def forward(self, session_id: str, message: object, wait_s: float) -> Any:
        if await self.runs.last_seq(session_id) == 0:
            raise SessionNotFound(session_id)
        if isinstance(message, m.Send):
            return await self._send(session_id, message)
        if isinstance(message, m.StopRun):
            return await self._stop(session_id, message)
        if type(message).__name__ in ASKABLE:
            return await self._ask(session_id, message, wait_s)
        raise SessionError(
            f"{type(message).__name__} cannot be sent to session {session_id!r}, "
            "which runs on another node"
        )

    async def _send(self, session_id: str, message: m.Send) -> m.RunStartedReply:
        # Bad input is refused here, as the owner would, before anything is written.
        check_text(message.text, clean_images(message.images))
        check_files(message.files)
        row_id = str(uuid.uuid4())
        with anyio.CancelScope(shield=True):  # a client gone meanwhile does not undo it
            await self.inbox.put(row_id, session_id, "send", send_payload(message))
        row = await self.wait(row_id, self.accept_wait_s)
        if row is not None and row.error is not None:
            raise_refusal(row.error)
        if row is not None and isinstance(row.result, dict) and "after_seq" in row.result:
            return m.RunStartedReply(
                run_id=row_id,
                after_seq=int(row.result["after_seq"]),
                queued=bool(row.result.get("queued")),
            )
        # Durable but not picked up yet: it runs when a node delivers it.
        return m.RunStartedReply(
            run_id=row_id, after_seq=await self.runs.last_seq(session_id), queued=True
        )

    async def _stop(self, session_id: str, message: m.StopRun) -> bool:
        run_id = await self.runs.active_run(session_id)
        if run_id is None:
            return False
        row_id = str(uuid.uuid4())
        await self.inbox.put(
            row_id, session_id, "stop", {"reason": message.reason, "run_id": run_id}
        )
        row = await self.wait(row_id, self.accept_wait_s)
        if row is not None and row.done_at is not None and row.error is None:
            return bool(row.result)
        return True  # on its way: the owner (or the next one) delivers it

    async def _ask(self, session_id: str, message: object, wait_s: float) -> Any:
        row_id = str(uuid.uuid4())
        await self.inbox.put(row_id, session_id, "ask", ask_payload(message))
        row = await self.wait(row_id, wait_s)
        if row is None or row.done_at is None:
            raise ClusterUnavailable(
                f"the node running session {session_id!r} did not answer within {wait_s:.0f} s"
            )
        if row.error is not None:
            raise_refusal(row.error)
        return row.result.get("value") if isinstance(row.result, dict) else None

    async def wait(self, row_id: str, wait_s: float) -> InboxRow | None:
        """The row once its owner accepted it (or finished it), or as it is at the end
        of ``wait_s``."""
        row: InboxRow | None = None
        with anyio.move_on_after(wait_s):
            while True:
                wake = self._waiter(row_id)
                row = await self.inbox.get(row_id)
                if row is not None and (row.accepted_at is not None or row.done_at is not None):
                    break
                with anyio.move_on_after(POLL_S):
                    await wake.wait()
        self._waiters.pop(row_id, None)
        return row

    def _waiter(self, row_id: str) -> anyio.Event:
        waiter = self._waiters.get(row_id)
        if waiter is None or waiter.is_set():
            waiter = self._waiters[row_id] = anyio.Event()
        return waiter
