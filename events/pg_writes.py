"""The statements of the PostgreSQL store's write transaction (``events.postgres``), and
how a global position is made from the writing transaction's id.

No lock is shared by all writers. A transaction locks the streams it writes (one
transaction-scoped advisory lock per stream, in key order), then reads their heads and
takes its transaction id in one statement. Its events' positions are that id times
2**POSITION_SHIFT plus their index in the transaction: unique, growing with the
transaction id, with gaps between transactions.

A reader of the global log by position (``read_all``) takes only the rows of
transactions older than the oldest one still running in its own statement's snapshot
(``HORIZON``; those running in another database never write here): none of those can
still commit, so a reader that moves past a
position never misses a row committed later below it. Per stream, positions follow
seqs: a later writer of a stream waited for the stream's lock, so it took its id after
the earlier writer committed (ids are handed out in time order).

Every wait is bounded (``wait_settings``); and ownership's fencing epochs are checked
by the write transaction (``navi_owners``, below).
"""

from __future__ import annotations

import hashlib

import anyio
import asyncpg
import structlog

from events.errors import ConcurrencyError, EventStoreError

log = structlog.get_logger(__name__)

CHANNEL = "navi_events"
# pg_advisory_xact_lock key taken while the tables are created (at open, not per write).
SCHEMA_LOCK_KEY = 0x6E617669  # "navi" in ASCII
# Events one transaction may write: positions are (transaction id << 24) + index.
POSITION_SHIFT = 24
MAX_EVENTS_PER_TRANSACTION = (1 << POSITION_SHIFT) - 1

# Planning in the transaction, after the streams' locks: each stream's head, and the
# transaction id (taken in this statement, so after the locks: see the module doc). The
# NOTIFY of every stream of the batch is queued by a statement of the transaction:
# PostgreSQL sends it only at COMMIT (and a stream whose append turns out stale gets a
# needless wake-up: its listeners re-read).
# With them, each stream's owner epoch (``navi_owners``, below).
HEADS_AND_XID = (
    "SELECT s, coalesce((SELECT seq FROM navi_events WHERE stream_id = s "
    "ORDER BY seq DESC LIMIT 1), 0), pg_current_xact_id()::text::bigint, "
    "(SELECT epoch FROM navi_owners WHERE session_id = s), "
    "pg_notify($2, $3 || s)::text FROM unnest($1::text[]) AS s"
)

# Fencing. Each time a node takes a session (navi/cluster/ownership.py), the session's
# epoch grows by one, in a transaction that holds the stream's write lock (so it comes
# between two write transactions, never inside one); the node's store then writes the
# stream only while the epoch is still the one it was given (``fence``). A node that
# froze, lost the session and woke is refused: its epoch is old.
OWNERS_TABLE = (
    "CREATE TABLE IF NOT EXISTS navi_owners "
    "(session_id varchar(200) PRIMARY KEY, epoch bigint NOT NULL)"
)
LOCK_STREAMS = "SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k"
NEXT_EPOCHS = (
    "INSERT INTO navi_owners (session_id, epoch) SELECT s, 1 FROM unnest($1::text[]) AS s "
    "ON CONFLICT (session_id) DO UPDATE SET epoch = navi_owners.epoch + 1 "
    "RETURNING session_id, epoch"
)

# The first position no reader may pass yet: that of the oldest transaction running in
# the statement's snapshot, leaving out those seen running in another database (other
# applications on the same server, which never write here); one that ended since, or
# whose database is not shown (pg_stat_activity hides it from a role without
# pg_read_all_stats), counts: it can only hold readers back, never let them skip.
HORIZON = (
    "(SELECT coalesce((SELECT min(x::text::bigint) FROM pg_snapshot_xip(s) AS x "
    "WHERE x::text::bigint % 4294967296 NOT IN (SELECT backend_xid::text::bigint "
    "FROM pg_stat_activity WHERE datname <> current_database() "
    "AND backend_xid IS NOT NULL)), pg_snapshot_xmax(s)::text::bigint) "
    f"<< {POSITION_SHIFT} FROM pg_current_snapshot() AS s)"
)


def stream_lock_key(stream_id: str) -> int:
    """The advisory lock key of a stream's writers, the same in every process (two
    streams that share a key only wait for each other)."""
    digest = hashlib.blake2b(stream_id.encode(), digest_size=8, person=b"navi-str").digest()
    return int.from_bytes(digest, "big", signed=True)


def begin_locked(stream_ids: list[str]) -> str:
    """BEGIN and the locks of the streams, in one message (one round trip). Read
    committed, so that each statement after the locks sees the transactions that held
    them before. Keys in order, so that two batches never wait for each other in a
    circle. The keys are integers made here: nothing of the stream ids is in the SQL."""
    keys = ",".join(str(k) for k in sorted({stream_lock_key(s) for s in stream_ids}))
    return (
        "BEGIN ISOLATION LEVEL READ COMMITTED; "
        f"SELECT pg_advisory_xact_lock(k) FROM unnest('{{{keys}}}'::bigint[]) AS k"
    )


def wait_settings(timeout_s: float) -> dict[str, str]:
    """Server settings that bound every wait of a connection: for a lock, for a
    statement, and of a transaction left open by a client that stopped (its locks then
    go, and readers by position move on)."""
    ms = str(max(1, round(timeout_s * 1000))) if timeout_s > 0 else "0"  # 0: no bound
    return {
        "lock_timeout": ms,
        "statement_timeout": ms,
        "idle_in_transaction_session_timeout": ms,
    }


class FencedError(ConcurrencyError):
    """This process's epoch for the session is old: another node took the session over
    since. Nothing of the append was written."""

    def __init__(self, stream_id: str, epoch: int, current: int | None) -> None:
        self.stream_id = stream_id
        self.expected_seq = -1
        self.actual_seq = None
        self.epoch = epoch
        self.current = current
        EventStoreError.__init__(
            self,
            f"stream {stream_id!r}: this node's ownership (epoch {epoch}) was taken over "
            f"(epoch now {current}); nothing was written",
        )


class DatabaseWaitTimeout(EventStoreError):
    """A database wait took longer than the store's bound: a lock held by another
    node's transaction (one that froze, say), or a statement that ran too long. The
    transaction rolled back: nothing of the append was written."""

    def __init__(self, timeout_s: float, reason: str) -> None:
        self.timeout_s = timeout_s
        super().__init__(
            f"the database did not answer within {timeout_s:g} s ({reason}); "
            "nothing was written, try again"
        )


def as_wait_timeout(exc: BaseException, timeout_s: float) -> DatabaseWaitTimeout | None:
    """``exc`` as a ``DatabaseWaitTimeout`` when the server gave up waiting."""
    if isinstance(exc, asyncpg.LockNotAvailableError):
        return DatabaseWaitTimeout(timeout_s, "waiting for another writer of the session")
    if isinstance(exc, asyncpg.QueryCanceledError):
        return DatabaseWaitTimeout(
            timeout_s, "a statement, or its wait for another writer of the session, ran too long"
        )
    return None


async def roll_back(conn: asyncpg.Connection) -> None:
    """End a failed write transaction if the connection still works (the store then
    discards the connection anyway: closing it would roll back too, later)."""
    if conn.is_closed() or not conn.is_in_transaction():
        return
    with anyio.CancelScope(shield=True), anyio.move_on_after(2):
        try:
            await conn.execute("ROLLBACK")
        except Exception as exc:  # the connection broke: the server rolls back
            log.debug("postgres.rollback_failed", error=str(exc))
