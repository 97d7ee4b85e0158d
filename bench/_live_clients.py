"""The clients of bench/live_sessions.py (not a benchmark itself): one WebSocket client
per session that records when each frame and each chunk arrived, the ``/health`` and RSS
samplers, and the count check of what clients got against the sessions' logs."""

from __future__ import annotations

import bisect
import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import anyio
import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from _paced_fake import stamps


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Session:
    sid: str
    host: str  # the node this client talks to
    follower: bool = False  # only reads (the session runs on another node)
    chunks: int = 0  # chunk stamps received
    frames: dict[int, float] = field(default_factory=dict)  # seq -> received (epoch)
    llm_ms: list[float] = field(default_factory=list)  # per chunk
    sent: float = 0.0  # the message was sent (epoch)
    first: float = 0.0
    last: float = 0.0
    max_gap: float = 0.0
    queued: bool = False
    frames_seen: int = 0  # frames of any kind
    ended: bool = False
    close_code: int | None = None  # set when the server closed the socket
    close_reason: str = ""
    closed_at: float = 0.0  # epoch
    errors: list[str] = field(default_factory=list)


class Countdown:
    """Set once ``count`` clients have finished."""

    def __init__(self, count: int) -> None:
        self.left = count
        self.done = anyio.Event()
        if count <= 0:
            self.done.set()

    def finish(self) -> None:
        self.left -= 1
        if self.left <= 0:
            self.done.set()


async def follow(
    session: Session,
    connected: anyio.Event,
    go: anyio.Event,
    countdown: Countdown | None = None,
) -> None:
    """One client: connect, wait for the start signal, send the message (unless a follower),
    read to the end of the run."""
    try:
        async with connect(
            f"ws://{session.host}/ws/sessions/{session.sid}",
            max_size=None,
            open_timeout=120,
            ping_interval=None,  # the server pings; the client only answers
        ) as ws:
            connected.set()
            await go.wait()
            session.sent = time.time()
            if not session.follower:
                await ws.send(json.dumps({"type": "message", "content": "stream"}))
            while True:
                raw = await ws.recv()
                now = time.time()
                frame = json.loads(raw)
                session.frames_seen += 1
                kind = frame["type"]
                if kind == "stream_delta":
                    sent = stamps(frame["delta"])
                    session.chunks += len(sent)
                    session.llm_ms.extend((now - s) * 1000 for s in sent)
                    session.frames[frame["seq"]] = now
                    if session.last:
                        session.max_gap = max(session.max_gap, now - session.last)
                    session.first = session.first or now
                    session.last = now
                elif kind == "run_queued":
                    session.queued = True
                elif kind in ("stream_end", "stream_stopped"):
                    session.ended = kind == "stream_end"
                    return
                elif kind == "error":
                    session.errors.append(str(frame.get("message", ""))[:200])
                    if not frame.get("fatal"):
                        return
    except ConnectionClosed as exc:
        session.close_code = exc.rcvd.code if exc.rcvd else 1006
        # Who closed first: the server ("server: ..."), or this client (its keepalive,
        # or a protocol error it saw), whose close the server echoed.
        by = "server" if exc.rcvd_then_sent or exc.sent is None else "client"
        frame = exc.rcvd if by == "server" else exc.sent
        session.close_reason = f"{by}: {frame.reason if frame else 'no close frame'}"
        session.closed_at = time.time()
    except (OSError, TimeoutError) as exc:
        session.errors.append(repr(exc)[:200])
    finally:
        connected.set()
        if countdown is not None:
            countdown.finish()


async def poll_health(base: str, out: list[float], stop: anyio.Event) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        while not stop.is_set():
            t0 = time.perf_counter()
            await http.get("/health")
            out.append((time.perf_counter() - t0) * 1000)
            with anyio.move_on_after(0.5):
                await stop.wait()


async def sample_rss(pids: list[int], out: list[float], stop: anyio.Event) -> None:
    while not stop.is_set():
        out.append(sum(rss_mib(p) for p in pids))
        with anyio.move_on_after(0.25):
            await stop.wait()


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


async def check_logs(
    base: str, sessions: list[Session], expected: int
) -> tuple[list[float], int, int, int]:
    """Commit -> frame latency per chunk, chunks missing from logs, logged chunks the client
    did not get, chunks logged."""
    commit_ms: list[float] = []
    missing_in_log = missing_at_client = total = 0
    limiter = anyio.Semaphore(8)
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:

        async def one(s: Session) -> None:
            nonlocal missing_in_log, missing_at_client, total
            async with limiter:
                text = (await http.get(f"/sessions/{s.sid}/events")).text
            logged = 0
            frame_seqs = sorted(s.frames)
            for line in text.splitlines():
                event = json.loads(line)
                if event["type"] != "llm.text":
                    continue
                logged += len(stamps(line))
                i = bisect.bisect_left(frame_seqs, event["seq"])
                if i < len(frame_seqs):
                    received = s.frames[frame_seqs[i]]
                    commit_ms.append((received - _epoch(event["timestamp"])) * 1000)
            total += logged
            missing_in_log += max(0, expected - logged)
            missing_at_client += max(0, logged - s.chunks)

        async with anyio.create_task_group() as tg:
            for s in sessions:
                tg.start_soon(one, s)
    return commit_ms, missing_in_log, missing_at_client, total
