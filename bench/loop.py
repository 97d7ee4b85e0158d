"""The agent loop's own overhead: a 20-iteration tool loop against the fake LLM server.

50 sessions of 20 iterations each (19 tool calls of a trivial tool, then an answer),
through the SQLite store and through the in-memory store, and the fake server's own
time for the same requests without Navi. Reports milliseconds per iteration, Navi's
overhead per iteration, and bytes of log per iteration.

    .venv/bin/python bench/loop.py [--sessions N] [--iterations N]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from _common import report
from events.memory import InMemoryEventStore
from navi.logs import configure_logging
from tests.support.fake_llm import FakeLLMServer, FakeToolCall, Reply
from tests.support.navi_app import navi_settings, open_navi

CALL = Reply(tool_calls=[FakeToolCall(name="todo", arguments={"action": "read"})])
ANSWER = Reply(text="Done: all steps read.")


def responder_for(iterations: int) -> Any:
    def respond(request: Any) -> Reply:
        body = request.body if hasattr(request, "body") else request
        calls = sum(1 for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls"))
        return CALL if calls < iterations - 1 else ANSWER

    return respond


async def navi_loop(root: Path, url: str, sessions: int, memory: bool) -> tuple[float, int, int]:
    settings = navi_settings(root, url, planning="off")
    store = InMemoryEventStore() if memory else None
    async with open_navi(settings, store=store) as navi:
        start = time.perf_counter()
        for _ in range(sessions):
            sid = await navi.create_session("secretary")
            await navi.run(sid, "Read the todo list over and over.")
        elapsed = time.perf_counter() - start
        events = await navi.store.read_all()
    # The store is closed: SQLite has checkpointed its WAL into the file.
    payload = sum(len(_payload(r)) for r in events)
    db = root / "navi.db"
    db_bytes = os.path.getsize(db) if not memory and db.exists() else 0
    return elapsed, payload, db_bytes


def _payload(record: Any) -> bytes:
    from events.codec import encode

    return encode(record.event)


async def fake_only(url: str, bodies: list[Any]) -> float:
    """The fake server's own time: the very requests Navi sent, replayed over HTTP
    without Navi (read to the end, as Navi does)."""
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        start = time.perf_counter()
        for body in bodies:
            async with http.stream("POST", "/api/chat", json=body) as response:
                async for _ in response.aiter_lines():
                    pass
        return time.perf_counter() - start


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args()
    configure_logging("WARNING")
    total = args.sessions * args.iterations
    figures: dict[str, float] = {}
    async with FakeLLMServer(responder=responder_for(args.iterations)) as fake:
        with tempfile.TemporaryDirectory() as tmp:
            sqlite_s, payload, db_bytes = await navi_loop(
                Path(tmp) / "sqlite", fake.url, args.sessions, False
            )
            bodies = [dict(b) for b in fake.requests]
            fake.requests.clear()
            memory_s, _, _ = await navi_loop(Path(tmp) / "memory", fake.url, args.sessions, True)
        fake_s = await fake_only(fake.url, bodies)
    per = 1000 / total
    figures = {
        "fake_server_ms_per_call": fake_s * per,
        "sqlite_ms_per_iteration": sqlite_s * per,
        "memory_ms_per_iteration": memory_s * per,
        "sqlite_overhead_ms_per_iteration": (sqlite_s - fake_s) * per,
        "memory_overhead_ms_per_iteration": (memory_s - fake_s) * per,
        "log_payload_bytes_per_iteration": payload / total,
        "sqlite_db_bytes_per_iteration": db_bytes / total,
    }
    print(f"{args.sessions} sessions x {args.iterations} iterations ({total} LLM calls)")
    print(f"fake server alone:       {figures['fake_server_ms_per_call']:.3f} ms per call")
    print(
        f"Navi + SQLite:           {figures['sqlite_ms_per_iteration']:.3f} ms per iteration "
        f"(overhead {figures['sqlite_overhead_ms_per_iteration']:.3f} ms)"
    )
    print(
        f"Navi + in-memory store:  {figures['memory_ms_per_iteration']:.3f} ms per iteration "
        f"(overhead {figures['memory_overhead_ms_per_iteration']:.3f} ms)"
    )
    print(
        f"log: {figures['log_payload_bytes_per_iteration']:.0f} payload bytes per iteration, "
        f"{figures['sqlite_db_bytes_per_iteration']:.0f} bytes of SQLite file per iteration"
    )
    report(figures)


if __name__ == "__main__":
    anyio.run(main)
