"""Safe retries of ``/v1``: the runs recent requests started, so a retry follows the
same run instead of starting another (docs/api.md, "/v1", "Retries").

A request is known by its ``Idempotency-Key`` header (kept ``KEY_TTL_S`` after the last
request that followed its run) or, without one, by its body (kept ``REPEAT_WINDOW_S``):
the official SDKs retry a timed-out or dropped request with the same body and no key.
Entries are the caller's: another user's key or body never finds them. A client that
hangs up stops its run only if no retry has come ``RETRY_GRACE_S`` later.

Two ledgers keep the same contract (tests/navi/server/ledger_contract.py): this
module's ``RunLedger`` in one node's memory (SQLite, in-memory stores: one node), and
``PostgresRunLedger`` (ledger_pg.py) in a table every node of a PostgreSQL cluster
shares, so a retry that a balancer sends to another node follows the same run.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import anyio

from events.store import EventStore
from events.types import RunCompleted, RunFailed, RunStopped
from navi.server.openai.errors import OpenAIError, invalid
from navi.session import messages as m

KEY_TTL_S = 600.0
REPEAT_WINDOW_S = 60.0
RETRY_GRACE_S = 5.0
MAX_KEY_CHARS = 255
_ENDS = (RunCompleted, RunStopped, RunFailed)

# Starts the run of a request the ledger does not know: its session and the reply.
Start = Callable[[], Awaitable[tuple[str, m.RunStartedReply]]]


def key_reused() -> OpenAIError:
    return invalid(
        "this Idempotency-Key was used for another request: use a new key",
        code="idempotency_key_reused",
    )


class Ledger(Protocol):
    """The runs of recent ``/v1`` requests, by (user, name): ``key:<Idempotency-Key>``
    or ``body:<fingerprint>``."""

    async def start_or_follow(
        self, user_id: str, name: str, fingerprint: str, keep_s: float, start: Start
    ) -> tuple[Entry, bool]:
        """The run an equal request started (and True), else ``start()``'s (and False):
        two equal requests at once make one run. A known name with another fingerprint
        raises ``key_reused()``; a failing ``start`` leaves nothing behind."""

    async def leave(self, entry: Entry) -> None:
        """A request that followed ``entry``'s run is done (its entry is kept on)."""

    async def forget(self, entry: Entry) -> None:
        """A run that ended with nothing done (it failed before any tool acted): a
        retry starts a new one."""

    async def retried(self, entry: Entry) -> bool:
        """Whether another request follows ``entry``'s run since it did (any node)."""


@dataclass
class Entry:
    """A run some request started, and how many requests follow it now."""

    session_id: str
    reply: m.RunStartedReply
    fingerprint: str
    keep_s: float
    followers: int = 0
    seen: float = field(default_factory=time.monotonic)
    # A shared ledger's: the row's key (user, name), and its count of the requests
    # that followed the run when this one did (larger later: a retry came, on some node).
    key: tuple[str, str] = ("", "")
    mark: int = 0

    def expired(self, now: float) -> bool:
        return self.followers == 0 and now - self.seen > self.keep_s

    def follow(self) -> None:
        self.followers += 1
        self.seen = time.monotonic()

    def leave(self) -> None:
        self.followers -= 1
        self.seen = time.monotonic()


class RunLedger:
    """The ``Ledger`` in this node's memory. ``lock`` is held from the look-up to the
    entry's addition, so two equal requests at once make one run."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], Entry] = {}
        self.lock = anyio.Lock()

    def find(self, user_id: str, key: str) -> Entry | None:
        now = time.monotonic()
        for name in [k for k, e in self._entries.items() if e.expired(now)]:
            del self._entries[name]
        return self._entries.get((user_id, key))

    async def start_or_follow(
        self, user_id: str, name: str, fingerprint: str, keep_s: float, start: Start
    ) -> tuple[Entry, bool]:
        async with self.lock:
            entry = self.find(user_id, name)
            if entry is not None and entry.fingerprint != fingerprint:
                raise key_reused()
            found = entry is not None
            if entry is None:
                session_id, reply = await start()
                entry = Entry(session_id, reply, fingerprint, keep_s)
                self._entries[(user_id, name)] = entry
            entry.follow()
        return entry, found

    async def leave(self, entry: Entry) -> None:
        entry.leave()

    async def forget(self, entry: Entry) -> None:
        for name in [k for k, e in self._entries.items() if e is entry]:
            del self._entries[name]

    async def retried(self, entry: Entry) -> bool:
        return entry.followers > 0


async def stop_unless_retried(
    store: EventStore, ledger: Ledger, entry: Entry, stop: Callable[[], Awaitable[None]]
) -> None:
    """A client following ``entry``'s run hung up: stop the run, unless a retry follows
    it within ``RETRY_GRACE_S`` or it has ended meanwhile."""
    with anyio.CancelScope(shield=True):
        await ledger.leave(entry)
        await anyio.sleep(RETRY_GRACE_S)
        if await ledger.retried(entry):
            return
        records = await store.read(entry.session_id, after_seq=entry.reply.after_seq)
        run_id = entry.reply.run_id
        if any(r.run_id == run_id and isinstance(r.event, _ENDS) for r in records):
            return
        await stop()
