"""Event-log append throughput and subscriber wake-up latency.

100,000 chunk-sized events (~200 bytes) through the SQLite store (and PostgreSQL when
NAVI_BENCH_POSTGRES_URL or NAVI_TEST_POSTGRES_URL is set), with raw sqlite3 batched
inserts (and raw asyncpg COPY transactions) measured in the same run as the ceiling.

PostgreSQL is measured in a database of its own, created next to the given one and
dropped after (if the user may not create databases, in the given one, after deleting
the bench's earlier events): rows deleted by earlier runs and not yet vacuumed (a test
server often runs without autovacuum) would slow every append down, run after run.

    .venv/bin/python bench/append.py [--events N] [--only memory,sqlite,postgres]
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import asyncpg
from _common import percentile, postgres_url, report
from sqlalchemy import text
from sqlalchemy.engine import make_url

from events.store import EventStore
from events.in_memory import InMemoryEventStore
from events.postgres import PostgresEventStore, asyncpg_dsn
from events.sql import INSERT_COLUMNS
from events.sqlite import SqliteEventStore
from events.types import LLMText
from events.writer import StreamWriter

CHUNK = LLMText(text="x" * 170)  # ~200 bytes of JSON payload
BATCH = 256  # what a streaming writer stages between flushes
PG_BATCH = 512  # the raw ceiling's transactions: a size a writer's batches reach


async def one_stream(store: EventStore, total: int) -> float:
    """One writer staging chunks one by one, as a streaming LLM call does; the writer
    group-commits them (batch size, delay, boundary)."""
    start = time.perf_counter()
    writer = StreamWriter(store, "bench-one", last_seq=0)
    async with writer.running():
        for _ in range(total):
            await writer.stage(CHUNK)
        await writer.commit()
    return total / (time.perf_counter() - start)


async def many_streams(
    store: EventStore, total: int, streams: int = 50, prefix: str = "bench-many"
) -> float:
    """Many writers, each awaiting small appends: the store's group commit batches them."""
    per = total // streams

    async def writer(i: int) -> None:
        seq = 0
        while seq < per:
            n = min(8, per - seq)
            await store.append(f"{prefix}-{i}", [CHUNK] * n, expected_seq=seq)
            seq += n

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(streams):
            tg.start_soon(writer, i)
    return per * streams / (time.perf_counter() - start)


async def nodes_at_once(url: str, total: int, nodes: int = 3) -> float:
    """``nodes`` stores on one database (as many nodes), each with 50 streams of its
    own: what the database lets several nodes write together."""
    async with AsyncExitStack() as stack:
        stores = [await stack.enter_async_context(PostgresEventStore(url)) for _ in range(nodes)]
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for n, store in enumerate(stores):
                tg.start_soon(many_streams, store, total // nodes, 50, f"bench-node{n}")
        return total // nodes // 50 * 50 * nodes / (time.perf_counter() - start)


async def wake_latency(store: EventStore, samples: int = 1000) -> tuple[float, float]:
    """Milliseconds from calling append to a live subscriber holding the event."""
    latencies: list[float] = []
    received = anyio.Event()
    sent_at = 0.0

    async def follow() -> None:
        nonlocal received
        async for _ in store.subscribe("bench-wake"):
            latencies.append((time.perf_counter() - sent_at) * 1000)
            received.set()
            if len(latencies) == samples:
                return

    async with anyio.create_task_group() as tg:
        tg.start_soon(follow)
        await anyio.sleep(0.05)
        for seq in range(samples):
            received = anyio.Event()
            sent_at = time.perf_counter()
            await store.append("bench-wake", [CHUNK], expected_seq=seq)
            await received.wait()
    return percentile(latencies, 50), percentile(latencies, 99)


def raw_sqlite(path: Path, total: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE TABLE e (position INTEGER PRIMARY KEY, stream_id TEXT, seq INTEGER, "
        "event_id TEXT, type TEXT, version INTEGER, timestamp REAL, run_id TEXT, "
        "causation_id TEXT, payload BLOB, UNIQUE (stream_id, seq))"
    )
    payload = b'{"type":"llm.text","text":"' + b"x" * 170 + b'"}'
    rows = [
        (
            i,
            "raw",
            i,
            f"00000000-0000-4000-8000-{i:012x}",
            "llm.text",
            1,
            time.time(),
            None,
            None,
            payload,
        )
        for i in range(1, total + 1)
    ]
    start = time.perf_counter()
    for k in range(0, total, BATCH):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO e VALUES (?,?,?,?,?,?,?,?,?,?)", rows[k : k + BATCH])
        conn.execute("COMMIT")
    rate = total / (time.perf_counter() - start)
    conn.close()
    return rate


async def run_store(label: str, make: object, total: int, figures: dict[str, float]) -> None:
    async with make() as store:  # type: ignore[operator]
        rate = await one_stream(store, total)
        print(
            f"{label:10} one stream, chunk by chunk: {rate:>10,.0f} events/s "
            f"({store.commit_count} transactions)"
        )
        figures[f"{label}_events_per_s"] = rate
    async with make() as store:  # type: ignore[operator]
        rate = await many_streams(store, total)
        print(
            f"{label:10} 50 streams, appends of 8:   {rate:>10,.0f} events/s "
            f"({store.commit_count} transactions)"
        )
        figures[f"{label}_concurrent_events_per_s"] = rate
    async with make() as store:  # type: ignore[operator]
        p50, p99 = await wake_latency(store)
        print(f"{label:10} append -> subscriber wake-up: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
        figures[f"{label}_wake_p50_ms"] = p50
        figures[f"{label}_wake_p99_ms"] = p99


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument(
        "--only", default="memory,sqlite,postgres", help="the stores to measure, comma-separated"
    )
    args = parser.parse_args()
    total, only = args.events, set(args.only.split(","))
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if "sqlite" in only:
            figures["raw_sqlite_events_per_s"] = raw_sqlite(Path(tmp) / "raw.db", total)
            print(
                f"{'raw sqlite3':10} batches of {BATCH}:             "
                f"{figures['raw_sqlite_events_per_s']:>10,.0f} events/s (the ceiling)"
            )
        counter = iter(range(1000))
        if "memory" in only:
            await run_store("memory", InMemoryEventStore, total, figures)
        if "sqlite" in only:
            await run_store(
                "sqlite",
                lambda: SqliteEventStore(Path(tmp) / f"navi{next(counter)}.db"),
                total,
                figures,
            )
        url = postgres_url()
        if "postgres" not in only:
            pass
        elif url:
            async with bench_database(url) as db:
                figures["raw_postgres_events_per_s"] = await raw_postgres(db, total)
                print(
                    f"{'raw asyncpg':10} COPY, {PG_BATCH} per transaction:  "
                    f"{figures['raw_postgres_events_per_s']:>10,.0f} events/s (the ceiling)"
                )
                await run_store("postgres", lambda: PostgresEventStore(db), total, figures)
                rate = await nodes_at_once(db, total)
                print(f"{'postgres':10} 3 stores (nodes) at once:   {rate:>10,.0f} events/s")
                figures["postgres_3_nodes_events_per_s"] = rate
        else:
            print("postgres   skipped: set NAVI_BENCH_POSTGRES_URL to measure it")
    if "sqlite" in only:
        figures["wake_p50_ms"] = figures["sqlite_wake_p50_ms"]
        figures["wake_p99_ms"] = figures["sqlite_wake_p99_ms"]
    report(figures)


@asynccontextmanager
async def bench_database(url: str) -> AsyncIterator[str]:
    """A fresh database next to ``url`` for the run, dropped after; or ``url`` itself,
    without the bench's earlier events, if this user may not create one."""
    name = f"navi_bench_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(asyncpg_dsn(url))
    try:
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        except asyncpg.InsufficientPrivilegeError:
            async with PostgresEventStore(url) as store, store.engine.begin() as conn:
                await conn.execute(text("DELETE FROM navi_events WHERE stream_id LIKE 'bench-%'"))
            yield url
            return
        try:
            yield make_url(url).set(database=name).render_as_string(hide_password=False)
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def raw_postgres(url: str, total: int) -> float:
    """The bare server path: the store's rows, COPY in transactions of PG_BATCH, one
    connection, durable commits; into a copy of the events table (indexes included)."""
    async with PostgresEventStore(url):  # creates the schema
        pass
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await conn.execute("DROP TABLE IF EXISTS navi_bench_raw")
        await conn.execute("CREATE TABLE navi_bench_raw (LIKE navi_events INCLUDING ALL)")
        payload = b'{"text":"' + b"x" * 170 + b'"}'
        now = time.time()
        rows = [
            (
                i,
                "raw",
                i,
                f"00000000-0000-4000-8000-{i:012x}",
                "llm.text",
                1,
                now,
                None,
                None,
                payload,
            )
            for i in range(1, total + 1)
        ]
        start = time.perf_counter()
        for k in range(0, total, PG_BATCH):
            async with conn.transaction():
                await conn.copy_records_to_table(
                    "navi_bench_raw", records=rows[k : k + PG_BATCH], columns=INSERT_COLUMNS
                )
        rate = total / (time.perf_counter() - start)
        await conn.execute("DROP TABLE navi_bench_raw")
    finally:
        await conn.close()
    return rate


if __name__ == "__main__":
    anyio.run(main)
