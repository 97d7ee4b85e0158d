"""PostgreSQL failing under load: the store's connections break (terminated by the
server, as in a restart) and the writer reconnects and retries with nothing lost or
doubled; a commit whose answer was lost is recognised; a broken LISTEN connection is
reopened. The real restart of the server is ``test_postgres_restart_under_load``
(only with ``NAVI_TEST_PG_RESTART=1``: it restarts the server every test shares)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import asyncpg
import pytest

from events.batch import AppendRequest, Planned
from events.postgres import PostgresEventStore
from events.types import LLMText
from events.writer import StreamWriter
from tests.chaos.harness import ChaosLLM, ServerConfig, install_tools
from tests.chaos.scenario import crash_loop

pytestmark = pytest.mark.postgres


async def _terminate(url: str, pid: int) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("SELECT pg_terminate_backend($1)", pid)
    finally:
        await conn.close()


def _writer_pid(store: PostgresEventStore) -> int | None:
    writer = store._writer
    return None if writer is None else int(writer[1].get_server_pid())


async def test_a_broken_writer_connection_loses_and_doubles_nothing(chaos_db: str) -> None:
    streams, per_stream = 8, 150
    kills = 0
    async with PostgresEventStore(chaos_db) as store:

        async def write(stream: str) -> None:
            writer = StreamWriter(store, stream, last_seq=0, max_delay=0.001)
            async with writer.running():
                for i in range(per_stream):
                    await writer.stage(LLMText(text=f"{stream}:{i}"))
                    if i % 10 == 9:
                        await writer.commit()
                        # Writing lasts long enough for several kills however fast the
                        # machine (15 commits a stream, each followed by this pause).
                        await anyio.sleep(0.02)
                    await anyio.lowlevel.checkpoint()
                await writer.commit()

        async def break_connections(done: anyio.Event) -> None:
            nonlocal kills
            rng = random.Random(3)
            while not done.is_set():
                await anyio.sleep(rng.uniform(0.01, 0.05))
                pid = _writer_pid(store)
                if pid is not None:
                    await _terminate(chaos_db, pid)
                    kills += 1

        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(break_connections, done)
            async with anyio.create_task_group() as writers:
                for n in range(streams):
                    writers.start_soon(write, f"s{n}")
            done.set()
        for n in range(streams):
            records = await store.read(f"s{n}")
            texts = [r.event.text for r in records]  # type: ignore[attr-defined]
            assert texts == [f"s{n}:{i}" for i in range(per_stream)]
            assert [r.seq for r in records] == list(range(1, per_stream + 1))
    assert kills >= 3
    assert store.reconnects >= 1


class LostAnswerStore(PostgresEventStore):
    """Its first commit lands, then the connection "breaks" before the answer."""

    lose_next = True

    async def _write_batch(self, driver: Any, batch: list[AppendRequest]) -> list[Planned]:
        planned = await super()._write_batch(driver, batch)
        if self.lose_next:
            self.lose_next = False
            raise asyncpg.ConnectionDoesNotExistError(
                "connection was closed in the middle of operation"
            )
        return planned


async def test_a_commit_whose_answer_was_lost_is_not_written_again(chaos_db: str) -> None:
    async with LostAnswerStore(chaos_db) as store:
        seen: list[int] = []

        async def follow() -> None:
            async for record in store.subscribe("s"):
                seen.append(record.seq)
                if record.seq == 3:
                    return

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            records = await store.append("s", [LLMText(text=t) for t in "abc"], expected_seq=0)
            with anyio.fail_after(5):
                while len(seen) < 3:
                    await anyio.sleep(0.01)
        assert [r.seq for r in records] == [1, 2, 3]
        assert [r.event.text for r in await store.read("s")] == ["a", "b", "c"]  # type: ignore[attr-defined]
        assert seen == [1, 2, 3]
        # The next append goes on after them.
        await store.append("s", [LLMText(text="d")], expected_seq=3)
        assert await store.last_seq("s") == 4


async def test_a_broken_listen_connection_is_reopened(chaos_db: str) -> None:
    async with PostgresEventStore(chaos_db) as writer, PostgresEventStore(chaos_db) as reader:
        reader.listen_check_s = 0.2
        await writer.append("s", [LLMText(text="a")], expected_seq=0)
        got: list[str] = []

        async def follow() -> None:
            async for record in reader.subscribe("s"):
                got.append(record.event.text)  # type: ignore[attr-defined]
                if len(got) == 3:
                    return

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            with anyio.fail_after(5):
                while not got:
                    await anyio.sleep(0.01)
            assert reader._listener is not None
            await _terminate(chaos_db, reader._listener.get_server_pid())
            # Written while the reader is not listening, then after it is back.
            await writer.append("s", [LLMText(text="b")], expected_seq=1)
            with anyio.fail_after(10):
                while len(got) < 2:
                    await anyio.sleep(0.01)
            await writer.append("s", [LLMText(text="c")], expected_seq=2)
            with anyio.fail_after(10):
                while len(got) < 3:
                    await anyio.sleep(0.01)
        assert got == ["a", "b", "c"]


@pytest.mark.skipif(
    os.environ.get("NAVI_TEST_PG_RESTART") != "1" or shutil.which("pg_ctlcluster") is None,
    reason="restarts the PostgreSQL server every test shares: set NAVI_TEST_PG_RESTART=1",
)
async def test_postgres_restart_under_load(tmp_path: Path, chaos_db: str) -> None:
    tools, effects = install_tools(tmp_path)
    version, cluster = os.environ.get("NAVI_TEST_PG_CLUSTER", "15/main").split("/")

    def restart() -> None:
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, cluster, "restart"],
            check=True,
            capture_output=True,
        )

    with ChaosLLM() as llm:
        config = ServerConfig(tmp_path, chaos_db, llm.url, effects, tools)
        with anyio.fail_after(150):
            result = await crash_loop(config, sessions=3, kills=2, fault=restart, steps=8)
    assert result.kills == 2, "the database was not restarted: the runs ended first"
    assert result.findings.problems == []
    assert result.findings.events_lost == 0 and result.findings.duplicate_effects == 0
    assert result.findings.runs_finished == result.findings.runs
