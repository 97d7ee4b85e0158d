"""Safe retries of ``/v1``: the runs recent requests started, so a retry follows the
same run instead of starting another (docs/api.md, "/v1", "Retries").

A request is known by its ``Idempotency-Key`` header (kept ``KEY_TTL_S`` after the last
request that followed its run) or, without one, by its body (kept ``REPEAT_WINDOW_S``):
the official SDKs retry a timed-out or dropped request with the same body and no key.
Entries are the caller's: another user's key or body never finds them. A client that
hangs up stops its run only if no retry has come ``RETRY_GRACE_S`` later.

The ledger lives in the memory of one node: behind a balancer, a retry that reaches
another node starts a run there (a ledger in PostgreSQL would be needed for that).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from events.store import EventStore
from events.types import RunCompleted, RunFailed, RunStopped
from navi.session import messages as m

KEY_TTL_S = 600.0
REPEAT_WINDOW_S = 60.0
RETRY_GRACE_S = 5.0
MAX_KEY_CHARS = 255
_ENDS = (RunCompleted, RunStopped, RunFailed)


@dataclass
class Entry:
    """A run some request started, and how many requests follow it now."""

    session_id: str
    reply: m.RunStartedReply
    fingerprint: str
    keep_s: float
    followers: int = 0
    seen: float = field(default_factory=time.monotonic)

    def expired(self, now: float) -> bool:
        return self.followers == 0 and now - self.seen > self.keep_s

    def follow(self) -> None:
        self.followers += 1
        self.seen = time.monotonic()

    def leave(self) -> None:
        self.followers -= 1
        self.seen = time.monotonic()


class RunLedger:
    """The runs of recent ``/v1`` requests, by (user, key). ``lock`` is held from the
    look-up to the entry's addition, so two equal requests at once make one run."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], Entry] = {}
        self.lock = anyio.Lock()

    def find(self, user_id: str, key: str) -> Entry | None:
        now = time.monotonic()
        for name in [k for k, e in self._entries.items() if e.expired(now)]:
            del self._entries[name]
        return self._entries.get((user_id, key))

    def add(self, user_id: str, key: str, entry: Entry) -> Entry:
        self._entries[(user_id, key)] = entry
        return entry

    def forget(self, entry: Entry) -> None:
        """A run that ended with nothing done (it failed before any tool acted): a
        retry starts a new one."""
        for name in [k for k, e in self._entries.items() if e is entry]:
            del self._entries[name]


async def stop_unless_retried(
    store: EventStore, entry: Entry, stop: Callable[[], Awaitable[None]]
) -> None:
    """A client following ``entry``'s run hung up: stop the run, unless a retry follows
    it within ``RETRY_GRACE_S`` or it has ended meanwhile."""
    entry.leave()
    with anyio.CancelScope(shield=True):
        await anyio.sleep(RETRY_GRACE_S)
        if entry.followers > 0:
            return
        records = await store.read(entry.session_id, after_seq=entry.reply.after_seq)
        run_id = entry.reply.run_id
        if any(r.run_id == run_id and isinstance(r.event, _ENDS) for r in records):
            return
        await stop()
