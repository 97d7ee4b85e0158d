"""End-to-end streaming: fake LLM → Navi (every chunk persisted) → WebSocket client.

A real ``navi serve`` process (SQLite) and a fake LLM process; the client is this
script. Measures chunks per second through one session with the fake streaming as
fast as it can (and the fake's own rate alone, to see which side is the limit), the
latency from a chunk's commit to its frame at the client, and the same latency with
200 sessions streaming at 50 chunks/s each, with the server's CPU use.

Latency is the client's receive time minus the event's recorded timestamp (taken by
the store's committer when it plans the batch). It is given per frame (the last chunk a
frame carries) and per chunk: a lagging client gets runs of deltas merged into one
frame, and every chunk in it counts, the oldest waited longest.

For live sessions at a real model's pace with what users meet (LLM -> frame latency from
send times stamped in each chunk, per-session rates, dropped sockets, /health under load,
RSS, every chunk counted against the log), see bench/live_sessions.py.

    .venv/bin/python bench/stream.py [--chunks N] [--sessions N]
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx
from websockets.asyncio.client import connect

from _common import ROOT, percentile, report
from tests.support.fake_llm import FakeLLMProcess, Reply
from tests.support.navi_server import free_port


CHUNK = "tok "


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def fake_alone(url: str, chunks: int) -> float:
    async with httpx.AsyncClient(timeout=60) as http:
        start = time.perf_counter()
        n = 0
        body = {"model": "fake-model:latest", "messages": [{"role": "user", "content": "x"}]}
        async with http.stream("POST", f"{url}/api/chat", json=body) as response:
            async for _ in response.aiter_lines():
                n += 1
        return n / (time.perf_counter() - start)


async def session_stream(
    base: str,
    ws_base: str,
    latencies: list[float] | None = None,
    chunk_latencies: list[float] | None = None,
) -> tuple[int, float]:
    """One turn over the WebSocket; returns (chunks received, seconds from first to last).
    Appends each frame's latency to ``latencies``, each chunk's to ``chunk_latencies``."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        sid = (await http.post("/sessions", json={})).json()["session_id"]
        received: dict[int, float] = {}
        first = last = 0.0
        count = 0
        async with connect(f"{ws_base}/ws/sessions/{sid}", max_size=None) as ws:
            await ws.send(json.dumps({"type": "message", "content": "stream"}))
            while True:
                frame = json.loads(await ws.recv())
                now = time.time()
                if frame["type"] == "stream_delta":
                    # A lagging client gets runs of deltas merged: count the chunks
                    # by their text ("tok " each).
                    count += len(frame["delta"]) // len(CHUNK)
                    received[frame["seq"]] = now
                    first = first or time.perf_counter()
                    last = time.perf_counter()
                elif frame["type"] in ("stream_end", "error", "stream_stopped"):
                    break
        if latencies is not None:
            log = (await http.get(f"/sessions/{sid}/events")).text.splitlines()
            frame_seqs = sorted(received)
            for line in log:
                event = json.loads(line)
                seq = event["seq"]
                committed = _epoch(event["timestamp"])
                if seq in received:
                    latencies.append((received[seq] - committed) * 1000)
                if chunk_latencies is not None and event["type"] == "llm.text":
                    # The chunk reached the client in the first frame at or after its seq.
                    i = bisect.bisect_left(frame_seqs, seq)
                    if i < len(frame_seqs):
                        chunk_latencies.append((received[frame_seqs[i]] - committed) * 1000)
        return count, last - first


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--per-session", type=int, default=100)
    args = parser.parse_args()
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, FakeLLMProcess() as fake:
        fake.script(Reply(text=[CHUNK] * args.chunks))
        figures["fake_alone_chunks_per_s"] = await fake_alone(fake.url, args.chunks)
        print(f"fake LLM alone:          {figures['fake_alone_chunks_per_s']:>10,.0f} chunks/s")

        port = free_port()
        env = dict(os.environ)
        env.update(
            NAVI_LLM_BACKEND="ollama",
            OLLAMA_HOST=fake.url,
            OLLAMA_DEFAULT_MODEL="fake-model:latest",
            NAVI_DATABASE_URL=f"sqlite:///{Path(tmp) / 'navi.db'}",
            SESSION_FILES_DIR=str(Path(tmp) / "files"),
            TOOLS_DIR=str(Path(tmp) / "tools"),
            LOG_LEVEL="WARNING",
            NAVI_RESUME_ON_START="false",
            NAVI_PLANNING="off",
        )
        server = subprocess.Popen(
            [sys.executable, "-m", "navi.cli", "serve", "--port", str(port)],
            cwd=Path(tmp),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        base, ws_base = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}"
        try:
            await _wait_up(base)
            fake.script(Reply(text=[CHUNK] * args.chunks))
            latencies: list[float] = []
            chunk_latencies: list[float] = []
            count, seconds = await session_stream(base, ws_base, latencies, chunk_latencies)
            rate = count / seconds if seconds else 0.0
            figures["e2e_chunks_per_s"] = rate
            figures["e2e_latency_p50_ms"] = percentile(latencies, 50)
            figures["e2e_latency_p99_ms"] = percentile(latencies, 99)
            figures["e2e_frames"] = len(latencies)
            figures["e2e_chunk_latency_p50_ms"] = percentile(chunk_latencies, 50)
            figures["e2e_chunk_latency_p99_ms"] = percentile(chunk_latencies, 99)
            print(
                f"Navi end to end:         {rate:>10,.0f} chunks/s ({count} chunks, each persisted)"
            )
            print(
                f"commit -> frame latency: p50 {figures['e2e_latency_p50_ms']:.2f} ms, "
                f"p99 {figures['e2e_latency_p99_ms']:.2f} ms ({len(latencies)} frames); "
                f"per chunk p50 {figures['e2e_chunk_latency_p50_ms']:.2f} ms, "
                f"p99 {figures['e2e_chunk_latency_p99_ms']:.2f} ms"
            )

            fake.script(*[Reply(text=[CHUNK] * args.per_session, delay=0.02)] * args.sessions)
            latencies = []
            cpu0, t0 = cpu_seconds(server.pid), time.perf_counter()
            async with anyio.create_task_group() as tg:
                for _ in range(args.sessions):
                    tg.start_soon(session_stream, base, ws_base, latencies)
            cpu = (cpu_seconds(server.pid) - cpu0) / (time.perf_counter() - t0)
            figures["load_sessions"] = args.sessions
            figures["load_latency_p50_ms"] = percentile(latencies, 50)
            figures["load_latency_p99_ms"] = percentile(latencies, 99)
            figures["load_server_cpu_percent"] = cpu * 100
            print(
                f"{args.sessions} sessions at 50 chunks/s: p50 {figures['load_latency_p50_ms']:.2f} ms, "
                f"p99 {figures['load_latency_p99_ms']:.2f} ms, server CPU {cpu * 100:.0f}% of a core"
            )
        finally:
            server.terminate()
            server.wait(10)
    report(figures)


async def _wait_up(base: str) -> None:
    async with httpx.AsyncClient() as http:
        for _ in range(300):
            try:
                if (await http.get(f"{base}/health")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await anyio.sleep(0.1)
    raise RuntimeError("navi serve did not start")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    anyio.run(main)
