"""Commit -> frame latency across nodes: 2 or 3 ``navi serve`` nodes on one PostgreSQL,
the sessions run on node A, one WebSocket client per session on A (the owner) and one
on each other node (a follower that learns of A's commits by NOTIFY). Latency is the
client's receive time of an event's first frame minus the event's recorded timestamp
(taken by A's committer when it plans the batch), for every event of every run.

Issue 34's bound: p99 < 250 ms on a node that does not own the session, and every
client gets every run's stream_end.

    NAVI_BENCH_POSTGRES_URL=postgresql://... .venv/bin/python bench/cross_node.py \
        [--nodes 2] [--sessions 20] [--runs 3] [--delay 0.02]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from websockets.asyncio.client import connect

from _common import percentile, postgres_url, report
from tests.chaos.harness import (
    ChaosLLM,
    NaviProcess,
    ServerConfig,
    create_session,
    install_tools,
    read_logs,
    send_message,
)
from tests.chaos.llm import spec_line
from tests.chaos.pg import fresh_database


class Client:
    """Follows one session on one node; keeps when each seq's first frame came."""

    def __init__(self, ws_base: str, session_id: str) -> None:
        self.url = f"{ws_base}/ws/sessions/{session_id}?after=0"
        self.connected = anyio.Event()
        self.received: dict[int, float] = {}
        self.ends = 0
        self.changed = anyio.Event()

    async def run(self) -> None:
        async with connect(self.url, open_timeout=30, max_size=None) as ws:
            self.connected.set()
            async for raw in ws:
                now = time.time()
                frame = json.loads(raw)
                if "seq" not in frame or frame.get("is_subagent"):
                    continue
                self.received.setdefault(frame["seq"], now)
                if frame["type"] == "stream_end":
                    self.ends += 1
                    self.changed.set()
                    self.changed = anyio.Event()


async def until_ends(clients: list[Client], ends: int, wait_s: float) -> None:
    with anyio.move_on_after(wait_s):
        for client in clients:
            while client.ends < ends:
                await client.changed.wait()


async def measure(
    url: str, root: Path, sessions: int, runs: int, delay: float, nodes: int
) -> dict[str, Any]:
    tools, effects = install_tools(root)
    with ChaosLLM() as llm:
        config = ServerConfig(root, url, llm.url, effects, tools, extra_env={"LOG_LEVEL": "ERROR"})
        servers = [NaviProcess(config, name) for name in "abcdefgh"[:nodes]]
        a = servers[0]
        for server in servers:
            server.start()
        try:
            for server in servers:
                await server.wait_up()
            ids = [await create_session(a.url) for _ in range(sessions)]
            on_a = [Client(a.ws_url, s) for s in ids]
            # One client per session on every other node.
            on_b = [Client(other.ws_url, s) for other in servers[1:] for s in ids]
            started = time.monotonic()
            async with anyio.create_task_group() as tg:
                for client in [*on_a, *on_b]:
                    tg.start_soon(client.run)
                for client in [*on_a, *on_b]:
                    await client.connected.wait()
                for run in range(runs):
                    async with anyio.create_task_group() as sends:
                        for i, session_id in enumerate(ids):
                            text = spec_line(f"r{i}x{run}", steps=0, delay=delay)
                            sends.start_soon(send_message, a.ws_url, session_id, text)
                    await until_ends(on_a, run + 1, 60)
                await until_ends(on_b, runs, 10)
                tg.cancel_scope.cancel()
            seconds = time.monotonic() - started
        finally:
            for server in servers:
                server.terminate()
    logs = await read_logs(url, ids)
    figures: dict[str, Any] = {
        "nodes": nodes,
        "sessions": sessions,
        "runs": runs,
        "seconds": seconds,
    }
    for name, clients in (("owner", on_a), ("follower", on_b)):
        latencies: list[float] = []
        for client, session_id in zip(clients, ids * (len(clients) // len(ids)), strict=True):
            for record in logs[session_id]:
                at = client.received.get(record.seq)
                if at is None:
                    continue  # an event with no frame, or a frame never received
                latencies.append((at - record.timestamp) * 1000)
        figures[f"{name}_frames"] = len(latencies)
        figures[f"{name}_p50_ms"] = percentile(latencies, 50)
        figures[f"{name}_p99_ms"] = percentile(latencies, 99)
        figures[f"{name}_max_ms"] = max(latencies, default=float("nan"))
        figures[f"{name}_clients_missing_stream_end"] = sum(c.ends < runs for c in clients)
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=2, help="2 to 8 nodes on one database")
    parser.add_argument("--delay", type=float, default=0.02, help="seconds between chunks")
    args = parser.parse_args()
    server_url = postgres_url()
    if server_url is None:
        raise SystemExit("set NAVI_BENCH_POSTGRES_URL (or NAVI_TEST_POSTGRES_URL)")
    with tempfile.TemporaryDirectory() as tmp:
        async with fresh_database(server_url, "navi_bench") as url:
            figures = await measure(
                url, Path(tmp), args.sessions, args.runs, args.delay, args.nodes
            )
    load = os.getloadavg()[0]
    print(
        f"cross-node follow: {args.nodes} nodes, {args.sessions} sessions x {args.runs} runs "
        f"on node A, a client per session on every node, load {load:.2f}"
    )
    for name in ("owner", "follower"):
        print(
            f"  {name:8} client: commit -> frame p50 {figures[f'{name}_p50_ms']:.1f} ms, "
            f"p99 {figures[f'{name}_p99_ms']:.1f} ms, max {figures[f'{name}_max_ms']:.1f} ms "
            f"({figures[f'{name}_frames']} events); "
            f"{figures[f'{name}_clients_missing_stream_end']} clients missing a stream_end"
        )
    figures["load"] = load
    report(figures)


if __name__ == "__main__":
    anyio.run(main)
