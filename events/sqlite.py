"""The SQLite event store (WAL): Navi's default, one file ``navi.db``.

The schema and the log-wide reads go through SQLAlchemy Core (aiosqlite). Commits and
stream reads do not: the committer owns a plain sqlite3 connection and stream reads
another one, because with aiosqlite each statement is a trip to another thread that
costs ten times the SQL itself (measured in bench/loop.py).

A commit runs on the event loop: without a sync to disk (``synchronous=NORMAL``, the
default, in WAL mode) a transaction of a few hundred rows takes a millisecond or two,
less than a hop to a thread, and a worker thread would wait for the GIL at every
statement while the loop is busy (8-14 ms for 256 rows, measured in bench/stream.py).
Only a commit that must wait goes to a thread: for the disk (``FULL``/``EXTRA``) or for
another process that holds the write lock.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from itertools import chain
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import structlog
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from events.batch import AppendRequest, Clock, IdFactory, Planned, new_uuid
from events.envelope import Recorded
from events.sql import INSERT_COLUMNS, READ_COLUMNS, SqlEventStore, row_to_recorded
from events.tuning import SQLITE_CHECKPOINT_EVERY as CHECKPOINT_EVERY
from events.tuning import SQLITE_READ_PAGE as READ_PAGE
from events.tuning import SQLITE_ROWS_PER_INSERT as ROWS_PER_INSERT
from events.tuning import STORE_INLINE_MAX_EVENTS

log = structlog.get_logger(__name__)

_ROW = f"({', '.join('?' for _ in INSERT_COLUMNS)})"
_INSERT_HEAD = f"INSERT INTO navi_events ({', '.join(INSERT_COLUMNS)}) VALUES "
_INSERT = _INSERT_HEAD + _ROW
_INSERT_MANY = _INSERT_HEAD + ", ".join([_ROW] * ROWS_PER_INSERT)
_HEAD = "SELECT coalesce(max(seq), 0) FROM navi_events WHERE stream_id = ?"
_POSITION = "SELECT coalesce(max(position), 0) FROM navi_events"
_USED_KEY = "SELECT first_seq, last_seq FROM navi_idempotency WHERE stream_id = ? AND key = ?"
_NEW_KEY = "INSERT INTO navi_idempotency (stream_id, key, first_seq, last_seq) VALUES (?, ?, ?, ?)"
# Space freed on the database's disk since a write was refused for want of it that
# counts as room again (``storage_full``): the next commit tells for sure.
_FREED_BYTES = 1024 * 1024
# How long a commit waits for another process's write lock (in a worker thread).
_BUSY_MS = 10_000


def insert_rows(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    whole = len(rows) - len(rows) % ROWS_PER_INSERT
    if whole:
        conn.executemany(
            _INSERT_MANY,
            [
                tuple(chain.from_iterable(rows[k : k + ROWS_PER_INSERT]))
                for k in range(0, whole, ROWS_PER_INSERT)
            ],
        )
    if whole < len(rows):
        conn.executemany(_INSERT, rows[whole:])


_READ_STREAM = (
    f"SELECT {', '.join(c.name for c in READ_COLUMNS)} FROM navi_events "
    "WHERE stream_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?"
)
_NO_END = 2**62
# In WAL mode a commit waits for the disk only with synchronous FULL or EXTRA.
_NO_SYNC_ON_COMMIT = frozenset({"OFF", "NORMAL"})


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused for a lock another connection holds (nothing was done)."""
    return "locked" in str(exc) or "busy" in str(exc)


def _checkpoint(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()


def _pragmas(dbapi_connection: Any, synchronous: str) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA synchronous={synchronous}")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


class _Checkpointer(threading.Thread):
    """Copies the WAL into the database file every CHECKPOINT_EVERY seconds while
    commits happen, on a connection of its own: a PASSIVE checkpoint waits for no
    reader or writer, and the committer goes on appending to the WAL meanwhile. A plain
    thread, not a task: it costs the event loop nothing (a task woke the loop ten times
    a second and hopped to a worker thread for each checkpoint)."""

    def __init__(self, path: Path, synchronous: str, commit_count: Callable[[], int]) -> None:
        super().__init__(name=f"sqlite-checkpoint {path.name}", daemon=True)
        self._path = path
        self._synchronous = synchronous
        self._commit_count = commit_count
        self._done = commit_count()  # read now: commits may come before the thread runs
        self._stopping = threading.Event()

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(self._path, isolation_level=None)
            _pragmas(conn, self._synchronous)
            done = self._done
            while not self._stopping.wait(CHECKPOINT_EVERY):
                count = self._commit_count()  # an int read: safe across threads
                if count == done:
                    continue
                done = count
                try:
                    _checkpoint(conn)
                except sqlite3.Error as exc:
                    # A full disk, say. The WAL still holds every commit; a dead
                    # checkpointer would let it grow without bound.
                    log.warning("sqlite.checkpoint_failed", error=str(exc))
                    done = -1  # try again at the next tick
        except sqlite3.Error as exc:  # could not even connect: the store goes on without
            log.warning("sqlite.checkpointer_failed", error=str(exc))
        finally:
            if conn is not None:
                conn.close()


class SqliteEventStore(SqlEventStore):
    """Write transactions take ``BEGIN IMMEDIATE`` so two processes on one file never
    deadlock on a lock upgrade; reads use their own connections and never block the
    writer (WAL)."""

    def __init__(
        self,
        path: str | Path = "navi.db",
        *,
        synchronous: str = "NORMAL",
        clock: Clock = time.time,
        new_id: IdFactory = new_uuid,
    ) -> None:
        self.path = Path(path)
        super().__init__(f"sqlite+aiosqlite:///{self.path}", clock=clock, new_id=new_id)
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValueError(f"unknown SQLite synchronous mode {synchronous!r}")
        self._synchronous = synchronous.upper()
        self._conn: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._checkpointer: _Checkpointer | None = None
        self._free_when_full = 0

    def _free_bytes(self) -> int:
        try:
            return shutil.disk_usage(self.path.parent).free
        except OSError:
            return 0

    def _note_full(self) -> None:
        super()._note_full()
        self._free_when_full = self._free_bytes()

    def storage_full(self) -> bool:
        if self._full and self._free_bytes() >= self._free_when_full + _FREED_BYTES:
            self._full = False  # room again: a refused write is to be tried again
        return self._full

    def _make_engines(self) -> tuple[AsyncEngine, AsyncEngine]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        sync = self._synchronous
        writer = create_async_engine(self.url, pool_size=1, max_overflow=0)
        reader = create_async_engine(self.url)

        @event.listens_for(writer.sync_engine, "connect")
        def _writer_connect(dbapi_connection: Any, _record: Any) -> None:
            _pragmas(dbapi_connection, sync)
            # Transactions are begun explicitly, and IMMEDIATE (see _write).
            dbapi_connection.isolation_level = None

        @event.listens_for(writer.sync_engine, "begin")
        def _writer_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        @event.listens_for(reader.sync_engine, "connect")
        def _reader_connect(dbapi_connection: Any, _record: Any) -> None:
            _pragmas(dbapi_connection, sync)

        return writer, reader

    async def _locked_for_rewrite(self, conn: AsyncConnection, stream_id: str) -> int:
        # The write engine begins with BEGIN IMMEDIATE: the database's write lock is held.
        return int(await conn.scalar(text(_POSITION)) or 0)

    async def _open(self) -> None:
        await super()._open()  # the schema, through SQLAlchemy
        # Room in the statement cache for an INSERT of each size up to ROWS_PER_INSERT.
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, cached_statements=512
        )
        _pragmas(conn, self._synchronous)
        conn.execute("PRAGMA wal_autocheckpoint=0")  # see _Checkpointer
        self._conn = conn
        reader = sqlite3.connect(self.path, isolation_level=None)
        _pragmas(reader, self._synchronous)
        reader.execute("PRAGMA busy_timeout=0")  # a busy read goes to a thread (see _read)
        self._reader = reader
        self._busy_ms = -1  # the connection's busy_timeout (see _write)

    async def _started(self) -> None:
        self._checkpointer = _Checkpointer(self.path, self._synchronous, lambda: self.commit_count)
        self._checkpointer.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            checkpointer.stop()  # the committer drains; the checkpointer just ends
        try:
            await super().__aexit__(exc_type, exc, tb)
        finally:
            if checkpointer is not None:
                # A checkpoint under way ends first (waited for off the loop): none
                # outlives the store.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(checkpointer.join)

    async def _close(self) -> None:
        for conn in (self._conn, self._reader):
            if conn is not None:
                conn.close()
        self._conn = self._reader = None
        await super()._close()

    async def _read(
        self, stream_id: str, *, after_seq: int, to_seq: int | None, limit: int | None
    ) -> list[Recorded]:
        conn = self._reader
        assert conn is not None, "store not open"
        end = _NO_END if to_seq is None else to_seq
        records: list[Recorded] = []
        last = after_seq
        while True:
            want = READ_PAGE if limit is None else min(READ_PAGE, limit - len(records))
            try:
                rows = conn.execute(_READ_STREAM, (stream_id, last, end, want)).fetchall()
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
                # Rare in WAL mode (a reader can meet a WAL restart): wait in a thread.
                rest = None if limit is None else limit - len(records)
                return records + await super()._read(
                    stream_id, after_seq=last, to_seq=to_seq, limit=rest
                )
            records.extend(row_to_recorded(row) for row in rows)
            if len(rows) < want or len(records) == limit:
                return records
            last = rows[-1][1]
            await anyio.lowlevel.checkpoint()

    async def _commit(self, batch: list[AppendRequest]) -> list[Planned]:
        conn = self._conn
        assert conn is not None, "store not open"
        inline = sum(len(r.events) for r in batch) <= STORE_INLINE_MAX_EVENTS
        if inline and self._synchronous in _NO_SYNC_ON_COMMIT:
            try:
                return self._write(conn, batch, busy_ms=0)
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
        # The commit must wait (for another process's lock, or for the disk), or is large:
        # in a worker thread, so that the loop runs on. Only the committer writes on this
        # connection.
        return await anyio.to_thread.run_sync(self._write, conn, batch, _BUSY_MS)

    def _write(
        self, conn: sqlite3.Connection, batch: list[AppendRequest], busy_ms: int
    ) -> list[Planned]:
        """One transaction: the heads and the last position read under the write lock,
        the plan made on them, its rows inserted."""
        if busy_ms != self._busy_ms:
            conn.execute(f"PRAGMA busy_timeout={busy_ms}")
            self._busy_ms = busy_ms
        conn.execute("BEGIN IMMEDIATE")  # raises at once if locked and busy_ms is 0
        try:
            heads = {
                s: conn.execute(_HEAD, (s,)).fetchone()[0] for s in {r.stream_id for r in batch}
            }
            (position,) = conn.execute(_POSITION).fetchone()
            used: dict[tuple[str, str], tuple[int, int]] = {}
            for r in batch:
                if r.idempotency_key is not None:
                    found = conn.execute(_USED_KEY, (r.stream_id, r.idempotency_key)).fetchone()
                    if found is not None:
                        used[(r.stream_id, r.idempotency_key)] = (found[0], found[1])
            planned, rows, new_keys = self.plan_rows(batch, heads, position, used)
            if rows:
                insert_rows(conn, rows)
            if new_keys:
                conn.executemany(_NEW_KEY, new_keys)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return planned
