"""Every node serves the same log: two real ``navi serve`` nodes on one PostgreSQL, the
sessions run on node A, and clients on node B follow them through many runs over the
WebSocket. Each client on B gets every frame, in order, with each run's
``stream_end``; and ``?after=`` on either node gives exactly what the log holds after
that seq.

What went wrong before (issue 34): node B learnt a stream's head from a read, and when
A's NOTIFY for the run's last commit arrived while that read ran, B kept the old head
and answered every later read from it ("nothing new"), so the client waited for a
``stream_end`` that B never sent, even when it reconnected to B with ``?after=``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from websockets.asyncio.client import connect

from events.envelope import Recorded
from events.types import RunStarted
from navi.server.frames import FrameTranslator
from tests.chaos.harness import (
    ChaosLLM,
    NaviProcess,
    ServerConfig,
    Watcher,
    check,
    create_session,
    install_tools,
    read_logs,
    send_message,
)
from tests.chaos.llm import NUM_CTX, spec_line
from tests.support.frames import coalesce, wire

pytestmark = pytest.mark.postgres

SESSIONS = 20
RUNS = 3
# Clients on B per session: their reads overlap A's commits, as many users' would.
ON_B = 3


async def test_clients_on_the_other_node_get_every_frame_of_every_run(
    tmp_path: Path, chaos_db: str
) -> None:
    tools, effects = install_tools(tmp_path)
    with ChaosLLM() as llm:
        config = ServerConfig(tmp_path, chaos_db, llm.url, effects, tools)
        a, b = NaviProcess(config, "a"), NaviProcess(config, "b")
        a.start()
        b.start()
        try:
            with anyio.fail_after(90):
                await a.wait_up()
                await b.wait_up()
                ids, on_b, stuck = await _runs_followed_on_b(a, b)
                logs = await read_logs(chaos_db, ids)
                mismatches = await _reconnections(a, b, logs)
        finally:
            a.terminate()
            b.terminate()
    assert stuck == [], (
        f"on B, the clients of {len(stuck)} of {SESSIONS} sessions never got every stream_end"
    )
    findings = check(logs, effects, on_b)
    assert findings.problems == [], findings.problems
    assert findings.runs == findings.runs_finished == SESSIONS * RUNS
    assert mismatches == [], mismatches


async def _runs_followed_on_b(
    a: NaviProcess, b: NaviProcess
) -> tuple[list[str], list[Watcher], list[str]]:
    """RUNS runs of each session on A, one after the other, each followed by a client
    on B (and one on A, which paces the runs); the sessions whose client on B did not
    get all its stream_ends within 10 s of the last run's end on A."""
    ids = [await create_session(a.url) for _ in range(SESSIONS)]
    on_a = [Watcher(s, [a.ws_url]) for s in ids]
    on_b = [Watcher(s, [b.ws_url], runs=RUNS) for s in ids for _ in range(ON_B)]
    async with anyio.create_task_group() as tg:
        for watcher in [*on_a, *on_b]:
            tg.start_soon(watcher.run)
        for run in range(RUNS):
            async with anyio.create_task_group() as sends:
                for i, session_id in enumerate(ids):
                    text = spec_line(f"r{i}x{run}", steps=0, delay=0.002)
                    sends.start_soon(send_message, a.ws_url, session_id, text)
            for watcher in on_a:
                await watcher.ended.wait()
                watcher.expect_another_run()
        with anyio.move_on_after(10):
            for watcher in on_b:
                await watcher.ended.wait()
        tg.cancel_scope.cancel()
    stuck = sorted({w.session_id for w in on_b if not w.ended.is_set()})
    return ids, on_b, stuck


async def _reconnections(
    a: NaviProcess, b: NaviProcess, logs: dict[str, list[Recorded]]
) -> list[str]:
    """Reconnect to both nodes with ``?after=`` at each run's start and at every seq of
    the last run (where a client that lost its connection would be): the frames must be
    exactly the log's after that seq."""
    mismatches: list[str] = []
    for session_id, records in logs.items():
        starts = [r.seq - 1 for r in records if isinstance(r.event, RunStarted)]
        for after in sorted({*starts, *range(starts[-1], records[-1].seq)}):
            expected = _frames_after(records, after)
            if not expected:
                continue
            for node in (a, b):
                got = await _frames_on_reconnect(node, session_id, after, expected[-1])
                if [_key(f) for f in coalesce(got)] != [_key(f) for f in coalesce(expected)]:
                    mismatches.append(
                        f"{node.name} {session_id} ?after={after}: {len(got)} frames, "
                        f"the log gives {len(expected)}"
                    )
    return mismatches


def _frames_after(records: list[Recorded], after: int) -> list[dict[str, Any]]:
    translator = FrameTranslator(max_context_tokens=NUM_CTX)
    translator.prime([r for r in records if r.seq <= after])
    return wire([f for r in records if r.seq > after for f in translator.frames(r)])


async def _frames_on_reconnect(
    node: NaviProcess, session_id: str, after: int, last: dict[str, Any]
) -> list[dict[str, Any]]:
    """The frames a client reconnecting with ``?after=`` gets, up to ``last`` (the
    log's last frame); what came by then if it never comes (5 s)."""
    got: list[dict[str, Any]] = []
    url = f"{node.ws_url}/ws/sessions/{session_id}?after={after}"
    with anyio.move_on_after(5):
        async with connect(url, open_timeout=5, max_size=None) as ws:
            async for raw in ws:
                frame = json.loads(raw)
                if "seq" not in frame or frame.get("is_subagent"):
                    continue
                got.append(frame)
                if frame["seq"] == last["seq"] and frame["type"] == last["type"]:
                    break
    return got


def _key(frame: dict[str, Any]) -> str:
    return json.dumps(frame, sort_keys=True)
