"""The SQLite event store (WAL): Navi's default, one file ``navi.db``.

The schema and the log-wide reads go through SQLAlchemy Core (aiosqlite). Writes and
stream reads do not: the committer owns a plain sqlite3 connection and stream reads
another one, because with aiosqlite each statement is a trip to another thread that
costs ten times the SQL itself (measured in bench/loop.py).
"""

from __future__ import annotations

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
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from events.base import AppendRequest, Clock, IdFactory, Planned, new_uuid
from events.envelope import Recorded
from events.planning import Guess
from events.sql import INSERT_COLUMNS, MAX_HEADS_AHEAD, READ_COLUMNS, SqlEventStore, row_to_recorded

log = structlog.get_logger(__name__)

# Batches up to this size are written on the event loop itself (see _commit). A worker
# thread would run the SQL in parallel, but while the loop is busy (a fast stream) it
# waits for the GIL at every statement (up to sys.getswitchinterval(), 5 ms, each):
# measured in bench/stream.py, a 256-event commit took 8-14 ms in the thread, 1-2 ms
# inline.
INLINE_MAX_EVENTS = 512
# The WAL is checkpointed by a background thread this often (while commits happen), not
# by whichever commit crosses SQLite's 1000-page threshold: that commit would take
# 35-50 ms (every ~13,000 streamed chunks, the p99 of bench/stream.py's latency).
CHECKPOINT_EVERY = 0.1

# Rows go in statements of ROWS_PER_INSERT rows each: one statement executes in one
# call into SQLite, so per-row work (statement reset, Python's parameter binding loop)
# is paid once per group (measured ~20% cheaper than executemany of single rows), and
# a writer thread takes the GIL back (to bind the next group) once per group, not per
# row, while the event loop plans the next batch.
ROWS_PER_INSERT = 128
_ROW = f"({', '.join('?' for _ in INSERT_COLUMNS)})"
_INSERT_HEAD = f"INSERT INTO navi_events ({', '.join(INSERT_COLUMNS)}) VALUES "
_INSERT = _INSERT_HEAD + _ROW
_INSERT_MANY = _INSERT_HEAD + ", ".join([_ROW] * ROWS_PER_INSERT)


_INSERT_OF: dict[int, str] = {}  # one statement inserting n rows, by n (see _write_unlocked)


def _insert_of(n: int) -> str:
    sql = _INSERT_OF.get(n)
    if sql is None:
        sql = _INSERT_OF[n] = _INSERT_HEAD + ", ".join([_ROW] * n)
    return sql


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


# Stream reads run on the event loop, on a plain sqlite3 connection of their own, a page
# at a time with a loop turn between pages: a session's recovery or a subscriber's
# catch-up reads a few rows, and through aiosqlite each read cost ~1 ms of thread hops
# (bench/loop.py: 4-5 ms per new session). A page of rows decodes in ~2 ms at most.
READ_PAGE = 500
_READ_STREAM = (
    f"SELECT {', '.join(c.name for c in READ_COLUMNS)} FROM navi_events "
    "WHERE stream_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?"
)
_NO_END = 2**62

# Python's sqlite3 passes every parameter but an int, float, str or bytearray through its
# adapter registry, and for a bytes or None (two in each row: the payload and the
# causation id) the lookup fails through attribute lookups that each format and clear
# an AttributeError: measured with callgrind, 14% of the instructions of a decision's
# INSERT call, a third of those outside SQLite itself. Identity adapters give sqlite3
# the very same values, found by one dict lookup. (The registry is global, but these
# change no value for anyone.)
sqlite3.register_adapter(bytes, bytes)
sqlite3.register_adapter(type(None), {}.get)  # type: ignore[arg-type]
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
    deadlock on a lock upgrade (a small commit is a single INSERT: ``_write_unlocked``);
    reads use their own connections and never block the writer (WAL)."""

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

    def _make_engines(self) -> tuple[AsyncEngine, AsyncEngine]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        sync = self._synchronous
        writer = create_async_engine(self.url, pool_size=1, max_overflow=0)
        reader = create_async_engine(self.url)

        @event.listens_for(writer.sync_engine, "connect")
        def _writer_connect(dbapi_connection: Any, _record: Any) -> None:
            _pragmas(dbapi_connection, sync)
            # Transactions are begun explicitly, and IMMEDIATE (see _write_batch / _lock_for_write).
            dbapi_connection.isolation_level = None

        @event.listens_for(writer.sync_engine, "begin")
        def _writer_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        @event.listens_for(reader.sync_engine, "connect")
        def _reader_connect(dbapi_connection: Any, _record: Any) -> None:
            _pragmas(dbapi_connection, sync)

        return writer, reader

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
        self._busy_ms = 10000
        self._limiter = anyio.CapacityLimiter(1)
        # What this connection's last commit left in the log (see _log_head).
        self._data_version: int | None = None
        self._known_heads: dict[str, int] = {}
        self._known_position: int | None = None

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

    @property
    def commits_now(self) -> bool:
        return self._synchronous in _NO_SYNC_ON_COMMIT

    def _commit_now(self, batch: list[AppendRequest]) -> list[Planned] | None:
        return self._write_inline(batch, None)

    def _write_inline(
        self, batch: list[AppendRequest], guess: Guess | None
    ) -> list[Planned] | None:
        """A batch of a decision or two (up to INLINE_MAX_EVENTS) written right here on
        the event loop: tens of microseconds, less than any hop to a thread; a small one
        as a single INSERT if it can be (``_write_unlocked``), else in a transaction.
        ``None``, with nothing written, when it is larger or another process holds the
        write lock: waiting for either belongs in a worker thread."""
        conn = self._conn
        assert conn is not None, "store not open"
        events = sum(len(r.events) for r in batch)
        if events > INLINE_MAX_EVENTS:
            return None
        try:
            planned = None
            if events <= ROWS_PER_INSERT:
                planned = self._write_unlocked(conn, batch, guess)
            if planned is None:
                planned = self._write_sync(conn, batch, 0, guess)
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                self._position_ahead = None
                raise
            return None
        except BaseException:
            self._position_ahead = None
            raise
        self._committed(guess)
        return planned

    async def _commit(self, batch: list[AppendRequest], guess: Guess | None) -> list[Planned]:
        """One transaction on the committer's own sqlite3 connection: on the loop if it
        can be (``_write_inline``), else in a worker thread, where waiting does not block
        the loop; it was planned ahead (``guess``), so the thread runs little more than
        SQL."""
        inline = self._write_inline(batch, guess)
        if inline is not None:
            return inline
        conn = self._conn
        assert conn is not None, "store not open"
        try:
            planned = await anyio.to_thread.run_sync(
                self._write_sync, conn, batch, 10000, guess, limiter=self._limiter
            )
        except BaseException:
            self._position_ahead = None
            raise
        self._committed(guess)
        return planned

    def _write_unlocked(
        self, conn: sqlite3.Connection, batch: list[AppendRequest], guess: Guess | None
    ) -> list[Planned] | None:
        """A small batch as one multi-row INSERT in autocommit mode, without BEGIN
        IMMEDIATE, the heads' lookup, and COMMIT (half the SQL of a decision's commit):
        one statement is atomic on its own. It is planned on the heads and position this
        store's last commit left, which hold only if no other connection wrote since;
        and if one did, the INSERT fails and writes nothing: positions are dense (every
        writer inserts at the last position + 1), so the other writer took the first
        position this plan uses (``PRIMARY KEY position``). ``None``, with nothing
        written, when the batch needs the full transaction (``_write_sync``): a stream
        this store has not written yet that is not expected to be new, an idempotency
        key to look up, no row to write (a stale ``expected_seq`` is only stale if the log
        is as known), or another writer came between (then what is known is forgotten
        and read again)."""
        position = self._known_position
        if position is None or conn.in_transaction:  # (the INSERT must commit by itself)
            return None
        known = self._known_heads
        heads: dict[str, int] = {}
        for request in batch:
            if request.idempotency_key is not None:
                return None
            head = known.get(request.stream_id)
            if head is None:
                if request.expected_seq != 0:
                    return None
                # A stream this store has not written, new as its writer expects (a
                # session's first event): if it is not, another writer holds its seq 1
                # and the INSERT fails on UNIQUE (stream_id, seq).
                head = 0
            heads[request.stream_id] = head
        planned, rows, _ = self.plan_in_transaction(batch, guess, heads, position, {})
        if not rows:
            return None
        if self._busy_ms != 0:  # another process's lock is waited for in a thread
            conn.execute("PRAGMA busy_timeout=0")
            self._busy_ms = 0
        try:
            conn.execute(
                _insert_of(len(rows)),
                rows[0] if len(rows) == 1 else tuple(chain.from_iterable(rows)),
            )
        except sqlite3.IntegrityError:
            # Another writer came between. The transaction would see it in data_version
            # too; forgetting what is known does not depend on that.
            self._known_heads, self._known_position = {}, None
            return None
        except sqlite3.OperationalError as exc:
            if not _busy(exc):  # a busy INSERT did nothing; anything else: ask the log
                self._known_position = None
            raise
        except BaseException:
            self._known_position = None
            raise
        left_heads, self._known_position = self._left
        known.update(left_heads)
        if len(known) > MAX_HEADS_AHEAD:
            self._known_heads = dict(left_heads)
        return planned

    def _write_sync(
        self,
        conn: sqlite3.Connection,
        batch: list[AppendRequest],
        busy_ms: int,
        guess: Guess | None,
    ) -> list[Planned]:
        if busy_ms != self._busy_ms:
            conn.execute(f"PRAGMA busy_timeout={busy_ms}")
            self._busy_ms = busy_ms
        streams = sorted({r.stream_id for r in batch})
        conn.execute("BEGIN IMMEDIATE")  # raises at once if locked and busy_ms is 0
        try:
            heads, position = self._log_head(conn, streams)
            used: dict[tuple[str, str], tuple[int, int]] = {}
            if guess is None or not guess.holds(heads, position):
                for r in batch:
                    if r.idempotency_key is not None:
                        found = conn.execute(
                            "SELECT first_seq, last_seq FROM navi_idempotency "
                            "WHERE stream_id = ? AND key = ?",
                            (r.stream_id, r.idempotency_key),
                        ).fetchone()
                        if found is not None:
                            used[(r.stream_id, r.idempotency_key)] = (found[0], found[1])
            planned, event_rows, new_keys = self.plan_in_transaction(
                batch, guess, heads, int(position), used
            )
            if event_rows:
                insert_rows(conn, event_rows)
            if new_keys:
                conn.executemany(
                    "INSERT INTO navi_idempotency (stream_id, key, first_seq, last_seq) "
                    "VALUES (?, ?, ?, ?)",
                    new_keys,
                )
            conn.execute("COMMIT")
        except BaseException:
            self._known_position = None
            conn.execute("ROLLBACK")
            raise
        left_heads, self._known_position = self._left
        self._known_heads.update(left_heads)
        if len(self._known_heads) > MAX_HEADS_AHEAD:
            self._known_heads = dict(left_heads)
        return planned

    def _log_head(self, conn: sqlite3.Connection, streams: list[str]) -> tuple[dict[str, int], int]:
        """The last seq of each of ``streams`` (0 if empty) and the last position, inside
        the write transaction. If no other connection has committed since this one last
        did (``data_version`` is unchanged), they are what this store's last commit left
        and need no query."""
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        known = self._known_heads
        if (
            version == self._data_version
            and self._known_position is not None
            and all(sid in known for sid in streams)
        ):
            return {sid: known[sid] for sid in streams}, self._known_position
        if version != self._data_version:  # another connection wrote: forget everything
            self._data_version = version
            self._known_heads = {}
        # One max() per stream, so SQLite answers each from the (stream_id, seq) index
        # instead of aggregating the whole stream.
        values = ", ".join("(?)" for _ in streams)
        rows = conn.execute(
            f"WITH s(id) AS (VALUES {values}) SELECT id, "
            "(SELECT max(seq) FROM navi_events WHERE stream_id = s.id) FROM s",
            streams,
        ).fetchall()
        (position,) = conn.execute("SELECT coalesce(max(position), 0) FROM navi_events").fetchone()
        return {sid: int(seq or 0) for sid, seq in rows}, int(position)
