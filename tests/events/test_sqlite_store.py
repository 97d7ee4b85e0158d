from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import events.sqlite
from events.errors import ConcurrencyError
from events.sqlite import SqliteEventStore
from events.store import EventStore
from events.types import LLMText
from tests.events.store_contract import DurableStoreContract
from tests.events.writer_contract import WriterContract


class TestSqliteEventStore(DurableStoreContract, WriterContract):
    @pytest.fixture(autouse=True)
    def _path(self, tmp_path: Path) -> None:
        self.path = tmp_path / "navi.db"

    @asynccontextmanager
    async def open_store(self, *, reopen: bool = False, **kw: Any) -> AsyncIterator[EventStore]:
        async with SqliteEventStore(self.path, **kw) as store:
            yield store


def test_unknown_synchronous_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SqliteEventStore(tmp_path / "x.db", synchronous="sometimes")


@pytest.mark.anyio
async def test_an_append_waits_for_another_process_without_blocking_the_loop(
    tmp_path: Path,
) -> None:
    """An append that finds the write lock held by another connection (another process)
    is not committed on the loop: it waits in a worker thread, and lands after it."""
    path = tmp_path / "navi.db"
    async with SqliteEventStore(path) as store:
        await store.append("s", [LLMText(text="one")], expected_seq=0)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await anyio.sleep(0.005)
                ticks += 1

        async def release() -> None:
            await anyio.sleep(0.2)
            other.execute("COMMIT")

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(tick)
                tg.start_soon(release)
                records = await store.append("s", [LLMText(text="two")], expected_seq=1)
                tg.cancel_scope.cancel()
        finally:
            other.close()
        assert [r.seq for r in records] == [2]
        assert ticks >= 10  # the loop ran on while the append waited for the lock
        assert [r.event.text for r in await store.read("s")] == ["one", "two"]  # type: ignore[attr-defined]


# ---------------------------------------------------------------- other processes


def _insert_foreign(path: Path, stream: str, seq: int) -> int:
    """What another process's commit leaves: one row at the next position. Returns it."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        (position,) = other.execute(
            "SELECT coalesce(max(position), 0) + 1 FROM navi_events"
        ).fetchone()
        other.execute(
            "INSERT INTO navi_events (position, stream_id, seq, event_id, type, version, "
            "timestamp, payload) VALUES (?, ?, ?, ?, 'llm.text', 1, 0.0, ?)",
            (position, stream, seq, f"foreign-{position}", b'{"text": "foreign"}'),
        )
        other.execute("COMMIT")
    finally:
        other.close()
    return int(position)


def _whole_log(path: Path) -> list[tuple[int, str, int]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT position, stream_id, seq FROM navi_events ORDER BY position")
        return [(int(p), str(s), int(q)) for p, s, q in rows]
    finally:
        conn.close()


@pytest.mark.anyio
async def test_a_stream_another_process_created_is_not_created_again(tmp_path: Path) -> None:
    path = tmp_path / "navi.db"
    async with SqliteEventStore(path) as store, SqliteEventStore(path) as other:
        await store.append("a", [LLMText(text="mine")], expected_seq=0)
        # The other process creates "b" before this store's last commit...
        await other.append("b", [LLMText(text="theirs")], expected_seq=0)
        await store.append("a", [LLMText(text="mine again")], expected_seq=1)
        # ...so this store's position is right, and only UNIQUE (stream, seq) objects.
        with pytest.raises(ConcurrencyError):
            await store.append("b", [LLMText(text="also mine")], expected_seq=0)
        records = await store.append("b", [LLMText(text="after")], expected_seq=1)
        assert [(r.seq, r.position) for r in records] == [(2, 4)]
    assert _whole_log(path) == [(1, "a", 1), (2, "b", 1), (3, "a", 2), (4, "b", 2)]


@pytest.mark.anyio
async def test_a_write_by_another_process_between_commits_is_seen(tmp_path: Path) -> None:
    """Another connection writes between two of this store's commits: the next commit
    lands after its row, since every transaction reads the heads under the lock."""
    path = tmp_path / "navi.db"
    async with SqliteEventStore(path) as store:
        await store.append("s", [LLMText(text="one")], expected_seq=0)
        await store.append("s", [LLMText(text="two")], expected_seq=1)
        assert _insert_foreign(path, "other", 1) == 3
        records = await store.append("s", [LLMText(text="3"), LLMText(text="4")], expected_seq=2)
        assert [(r.seq, r.position) for r in records] == [(3, 4), (4, 5)]
    assert _whole_log(path) == [
        (1, "s", 1),
        (2, "s", 2),
        (3, "other", 1),
        (4, "s", 3),
        (5, "s", 4),
    ]


@pytest.mark.anyio
async def test_a_head_moved_by_another_process_is_read_before_refusing(tmp_path: Path) -> None:
    """Another process appended to the stream and the caller counted it: this store's
    own idea of the head is stale, not the caller's ``expected_seq``. And one that did
    not count it is refused with nothing written."""
    path = tmp_path / "navi.db"
    async with SqliteEventStore(path) as store:
        await store.append("s", [LLMText(text="one")], expected_seq=0)
        await store.append("s", [LLMText(text="two")], expected_seq=1)
        _insert_foreign(path, "s", 3)
        records = await store.append("s", [LLMText(text="four")], expected_seq=3)
        assert [(r.seq, r.position) for r in records] == [(4, 4)]
        _insert_foreign(path, "s", 5)
        with pytest.raises(ConcurrencyError):
            await store.append("s", [LLMText(text="stale")], expected_seq=4)
    assert _whole_log(path) == [(p, "s", p) for p in range(1, 6)]


@pytest.mark.anyio
async def test_two_stores_on_one_file_keep_one_dense_log(
    tmp_path: Path,
) -> None:
    """Two stores on one file take turns writing small batches to shared streams, so
    that nearly every commit of each meets a write of the other: every event lands once,
    in a dense log, each stream numbered without a gap."""
    path = tmp_path / "navi.db"
    async with SqliteEventStore(path) as first, SqliteEventStore(path) as second:
        written = {"a": 0, "b": 0}
        for i in range(60):
            store = first if i % 3 else second
            stream = "a" if i % 2 else "b"
            events = [LLMText(text=f"{i}.{k}") for k in range(1 + i % 3)]
            records = await store.append(stream, events, expected_seq=written[stream])
            written[stream] += len(events)
            assert records[-1].seq == written[stream]
    log = _whole_log(path)
    assert [p for p, _, _ in log] == list(range(1, len(log) + 1))
    for stream, head in written.items():
        assert [q for _, s, q in log if s == stream] == list(range(1, head + 1))


# ---------------------------------------------------------------- the checkpointer


def _checkpointers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("sqlite-checkpoint")]


@pytest.mark.anyio
async def test_the_wal_is_checkpointed_by_a_thread_that_ends_with_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events.sqlite, "CHECKPOINT_EVERY", 0.01)
    calls = 0
    real = events.sqlite._checkpoint

    def failing_once(conn: sqlite3.Connection) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:  # a full disk, say: logged, and tried again at the next tick
            raise sqlite3.OperationalError("database or disk is full")
        real(conn)

    monkeypatch.setattr(events.sqlite, "_checkpoint", failing_once)
    path = tmp_path / "navi.db"
    async with SqliteEventStore(path) as store:
        assert len(_checkpointers()) == 1
        await store.append("s", [LLMText(text="one")], expected_seq=0)
        with anyio.fail_after(5):
            while calls < 2:
                await anyio.sleep(0.01)
        idle = calls
        await anyio.sleep(0.05)
        assert calls == idle  # no commit since: nothing to copy
    assert _checkpointers() == []
    # Everything is in the database file: a checkpoint finds nothing left to copy.
    conn = sqlite3.connect(path)
    try:
        busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert busy == 0 and frames == copied
    finally:
        conn.close()
