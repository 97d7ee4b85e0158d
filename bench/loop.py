"""The agent loop's own overhead: a 20-iteration tool loop against the fake LLM server.

50 sessions of 20 iterations each (19 tool calls of a trivial tool, then an answer),
through the SQLite store and through the in-memory store, and the fake server's own
time for the same requests without Navi. Reports milliseconds per iteration, Navi's
overhead per iteration, and bytes of log per iteration.

The fake server runs in its own process, as a real LLM server would: in this process
its work (parsing each request, rendering each answer) would count as Navi's. "The
fake server alone" is measured from this process over HTTP with the very request
bodies Navi sent, through a raw keep-alive socket that writes each request whole and
reads the answer to its end without parsing it (so that everything Navi does besides,
its HTTP client included, counts), interleaved with Navi session by session so that both see
the same load on a shared machine. To tell Navi's own work from its HTTP client's, the
SQLite sessions run once more with the LLM server's answers replayed from memory in place
of the HTTP exchange ("Navi without HTTP"). The figures are medians over the sessions: a burst
of load from another process spoils a few sessions, not the result. One untimed
session first warms both up (connections, caches) and records the request bodies
(every session sends the same ones). The CPU time of this process is measured the same
way: with the fake elsewhere, the difference is Navi's CPU per iteration, much less
disturbed by other processes than wall-clock time.

Last, a few more sessions without HTTP run with counters on (untimed: counting costs
CPU): event-loop turns, handles the loop ran, memory-stream receives and
``anyio.Event.wait`` calls per iteration, beside the events and commits. Unlike the
times, these do not depend on the machine or its load: they say how many task hops an
iteration takes (``--hops``: which tasks ran the handles).

    .venv/bin/python bench/loop.py [--sessions N] [--iterations N] [--hops]
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections import Counter
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio._backends._asyncio as anyio_asyncio
import httpx
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream

from _common import ROOT, median, report
from events.codec import encode_stored
from events.in_memory import InMemoryEventStore
from navi.app import Navi
from navi.cli import freeze_startup_objects
from navi.llm.http import LLMServer
from navi.logs import configure_logging
from tests.support.fake_llm import FakeLLMProcess, FakeToolCall, Reply
from tests.support.navi_app import navi_settings, open_navi

CALL = Reply(tool_calls=[FakeToolCall(name="todo", arguments={"action": "read"})])
ANSWER = Reply(text="Done: all steps read.")
PROMPT = "Read the todo list over and over."
COUNTED_SESSIONS = 5
CHUNKED_END = b"\r\n0\r\n\r\n"  # the last chunk of a chunked body, and its end


class Timing(msgspec.Struct):
    # Per session: (wall-clock seconds, CPU seconds of this process).
    navi: list[tuple[float, float]] = []
    fake: list[tuple[float, float]] = []
    without_http: list[tuple[float, float]] = []
    payload_bytes: int = 0
    db_bytes: int = 0
    counts: dict[str, float] = {}

    def per_iteration_ms(self, iterations: int) -> dict[str, float]:
        def ms(values: list[float]) -> float:
            return median(values) * 1000 / iterations

        return {
            "navi": ms([wall for wall, _ in self.navi]),
            "fake": ms([wall for wall, _ in self.fake]),
            "overhead": ms([n[0] - f[0] for n, f in zip(self.navi, self.fake, strict=True)]),
            "cpu_overhead": ms([n[1] - f[1] for n, f in zip(self.navi, self.fake, strict=True)]),
            "without_http": ms([wall for wall, _ in self.without_http]) if self.without_http else 0,
            "without_http_cpu": ms([cpu for _, cpu in self.without_http])
            if self.without_http
            else 0,
        }


async def one_session(navi: Navi) -> tuple[float, float]:
    start, cpu = time.perf_counter(), time.process_time()
    sid = await navi.create_session("secretary")
    await navi.run(sid, PROMPT)
    return time.perf_counter() - start, time.process_time() - cpu


class RawClient:
    """The fake server's own time, measured with as little client as there can be: one
    keep-alive socket, each request written whole, the answer read to the end of its
    chunked body and not parsed. What any HTTP client does beyond that (Navi's too)
    counts as its overhead."""

    def __init__(self, url: str) -> None:
        parsed = urlsplit(url)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or 80
        self.head = (
            f"POST /api/chat HTTP/1.1\r\nHost: {parsed.netloc}\r\n"
            "Content-Type: application/json\r\nAccept: application/json\r\n"
        ).encode()
        self.conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, body: bytes) -> None:
        if self.conn is None:
            self.conn = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.conn
        writer.write(self.head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        tail = b""
        while not tail.endswith(CHUNKED_END):
            data = await reader.read(65536)
            if not data:
                raise ConnectionError("the fake server closed the connection")
            tail = (tail + data)[-len(CHUNKED_END) :]

    def close(self) -> None:
        if self.conn is not None:
            self.conn[1].close()


async def fake_alone(client: RawClient, bodies: list[bytes]) -> tuple[float, float]:
    """The fake server's own time for one session's requests, read to the end as Navi
    reads them."""
    start, cpu = time.perf_counter(), time.process_time()
    for body in bodies:
        await client.post(body)
    return time.perf_counter() - start, time.process_time() - cpu


class Replayed:
    """The answers an LLM server gave, replayed in order in place of ``LLMServer.stream``:
    the HTTP exchange is gone, everything Navi does with the answer is kept."""

    def __init__(self, answers: list[bytes]) -> None:
        self.answers = answers
        self.sent = 0

    @asynccontextmanager
    async def stream(self, *_: object) -> AsyncIterator[Replayed]:
        self.sent += 1
        yield self

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        await anyio.lowlevel.checkpoint()  # as a network read would
        yield self.answers[(self.sent - 1) % len(self.answers)]


async def without_http(navi: Navi, answers: list[bytes]) -> tuple[float, float]:
    replayed, real = Replayed(answers), LLMServer.stream
    LLMServer.stream = replayed.stream  # type: ignore[method-assign,assignment]
    try:
        return await one_session(navi)
    finally:
        LLMServer.stream = real  # type: ignore[method-assign]


class Hops:
    """Counters of the event loop's work, patched into asyncio and anyio for this
    process only while ``counting`` (the library is left as it is, and the timed
    sessions run unpatched): loop turns (``_run_once``), handles run (a task step, a
    wake-up, a callback), memory-stream receives (``receive``, which waits when empty)
    and ``anyio.Event.wait`` calls. ``by_task`` (with ``--hops``) counts the handles by
    the coroutine they ran."""

    def __init__(self, by_task: bool) -> None:
        self.counts: Counter[str] = Counter()
        self.by_task: Counter[str] | None = Counter() if by_task else None

    @contextmanager
    def counting(self) -> Iterator[None]:
        counts, by_task = self.counts, self.by_task
        loop_class: Any = asyncio.base_events.BaseEventLoop
        handle_class: Any = asyncio.events.Handle
        run_once, run_handle = loop_class._run_once, handle_class._run
        receive, wait = MemoryObjectReceiveStream.receive, anyio_asyncio.Event.wait

        def counted_run_once(loop: asyncio.AbstractEventLoop) -> None:
            counts["turns"] += 1
            run_once(loop)

        def counted_handle(handle: asyncio.Handle) -> None:
            counts["handles"] += 1
            if by_task is not None:
                by_task[_handle_owner(handle)] += 1
            run_handle(handle)

        async def counted_receive(stream: MemoryObjectReceiveStream[object]) -> object:
            counts["receives"] += 1
            return await receive(stream)

        async def counted_wait(event: anyio.Event) -> None:
            counts["event_waits"] += 1
            await wait(event)

        loop_class._run_once, handle_class._run = counted_run_once, counted_handle
        MemoryObjectReceiveStream.receive = counted_receive  # type: ignore[method-assign,assignment]
        anyio_asyncio.Event.wait = counted_wait  # type: ignore[method-assign]
        try:
            yield
        finally:
            loop_class._run_once, handle_class._run = run_once, run_handle
            MemoryObjectReceiveStream.receive = receive  # type: ignore[method-assign]
            anyio_asyncio.Event.wait = wait  # type: ignore[method-assign]


def _handle_owner(handle: asyncio.Handle) -> str:
    """What a handle runs: for a task, its outermost coroutine of this project and the
    innermost one, where it waits; else the callback."""
    callback = handle._callback  # type: ignore[attr-defined]
    task = getattr(callback, "__self__", None)
    if not isinstance(task, asyncio.Task):
        return f"callback {getattr(callback, '__qualname__', callback)}"
    ours: list[str] = []
    coro: Any = task.get_coro()
    while coro is not None:
        code = getattr(coro, "cr_code", None) or getattr(coro, "ag_code", None)
        if code is not None and str(ROOT) in code.co_filename and "Hops" not in code.co_qualname:
            ours.append(code.co_qualname)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)
    if not ours:
        return "task (library)"
    return f"task {ours[0]} waiting in {ours[-1]}"


async def count_hops(
    navi: Navi, answers: list[bytes], hops: Hops, sessions: int
) -> dict[str, float]:
    """The counters per iteration over ``sessions`` sessions without HTTP, with the
    session's events and the store's commits."""
    commits = navi.store.commit_count
    replayed, real = Replayed(answers), LLMServer.stream
    LLMServer.stream = replayed.stream  # type: ignore[method-assign,assignment]
    events = 0
    try:
        for _ in range(sessions):
            with hops.counting():
                sid = await navi.create_session("secretary")
                await navi.run(sid, PROMPT)
            events += await navi.store.last_seq(sid)
    finally:
        LLMServer.stream = real  # type: ignore[method-assign]
    iterations = sessions * len(answers)
    counts = {k: v / iterations for k, v in hops.counts.items()}
    counts["events"] = events / iterations
    counts["commits"] = (navi.store.commit_count - commits) / iterations
    return counts


async def measure(
    root: Path, sessions: int, iterations: int, memory: bool, hops: Hops | None = None
) -> Timing:
    turn = [CALL] * (iterations - 1) + [ANSWER]
    timing = Timing()
    with FakeLLMProcess() as fake:
        # The warm-up session, each session twice (Navi, then the fake alone), then the
        # answers once more, kept for "Navi without HTTP".
        fake.script(*turn * (2 + 2 * sessions))  # (the counted sessions replay answers)
        settings = navi_settings(root, fake.url, planning="off")
        store = InMemoryEventStore() if memory else None
        http = RawClient(fake.url)
        async with open_navi(settings, store=store) as navi:
            await one_session(navi)
            freeze_startup_objects()  # as `navi serve` does once it is open
            bodies = [msgspec.json.encode(b) for b in fake.requests]
            assert len(bodies) == iterations, len(bodies)
            for _ in range(sessions):
                timing.navi.append(await one_session(navi))
                timing.fake.append(await fake_alone(http, bodies))
            http.close()
            async with httpx.AsyncClient() as client:
                answers = [
                    (await client.post(f"{fake.url}/api/chat", content=body)).content
                    for body in bodies
                ]
            if not memory:
                for _ in range(sessions):
                    timing.without_http.append(await without_http(navi, answers))
            if hops is not None:
                timing.counts = await count_hops(navi, answers, hops, COUNTED_SESSIONS)
            events = await navi.store.read_all()
        assert fake.state["requests"] == iterations * (2 + 2 * sessions)
    # The store is closed: SQLite has checkpointed its WAL into the file.
    timing.payload_bytes = sum(len(encode_stored(r.event)) for r in events)
    db = root / "navi.db"
    timing.db_bytes = os.path.getsize(db) if not memory and db.exists() else 0
    return timing


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--hops", action="store_true", help="count handles by task")
    args = parser.parse_args()
    hops = Hops(by_task=args.hops)
    configure_logging("WARNING")
    total = args.sessions * args.iterations
    # The SQLite log holds the warm-up session and each session twice (with and without HTTP).
    logged = 2 * total + args.iterations
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = await measure(Path(tmp) / "sqlite", args.sessions, args.iterations, False, hops)
        memory = await measure(Path(tmp) / "memory", args.sessions, args.iterations, True)
    s = sqlite.per_iteration_ms(args.iterations)
    m = memory.per_iteration_ms(args.iterations)
    figures = {
        "fake_server_ms_per_call": (s["fake"] + m["fake"]) / 2,
        "sqlite_ms_per_iteration": s["navi"],
        "memory_ms_per_iteration": m["navi"],
        "sqlite_overhead_ms_per_iteration": s["overhead"],
        "memory_overhead_ms_per_iteration": m["overhead"],
        "sqlite_cpu_overhead_ms_per_iteration": s["cpu_overhead"],
        "sqlite_without_http_ms_per_iteration": s["without_http"],
        "sqlite_without_http_cpu_ms_per_iteration": s["without_http_cpu"],
        "memory_cpu_overhead_ms_per_iteration": m["cpu_overhead"],
        "log_payload_bytes_per_iteration": sqlite.payload_bytes / logged,
        "sqlite_db_bytes_per_iteration": sqlite.db_bytes / logged,
        **{f"sqlite_without_http_{k}_per_iteration": v for k, v in sqlite.counts.items()},
    }
    print(f"{args.sessions} sessions x {args.iterations} iterations ({total} LLM calls each)")
    print(f"fake server alone:       {figures['fake_server_ms_per_call']:.3f} ms per call")
    for name, f in (("SQLite", s), ("in-memory store", m)):
        print(
            f"{'Navi + ' + name + ':':<24} {f['navi']:.3f} ms per iteration "
            f"(overhead {f['overhead']:.3f} ms; in CPU time of this process "
            f"{f['cpu_overhead']:.3f} ms)"
        )
    print(
        f"Navi + SQLite without HTTP (answers replayed from memory): {s['without_http']:.3f} ms "
        f"per iteration ({s['without_http_cpu']:.3f} ms of CPU time), so its HTTP client "
        f"costs about {s['overhead'] - s['without_http']:.3f} ms"
    )
    print(
        f"log: {figures['log_payload_bytes_per_iteration']:.0f} payload bytes per iteration, "
        f"{figures['sqlite_db_bytes_per_iteration']:.0f} bytes of SQLite file per iteration"
    )
    c = sqlite.counts
    print(
        f"per iteration without HTTP (SQLite): {c.get('turns', 0):.2f} event-loop turns, "
        f"{c.get('handles', 0):.2f} handles run, {c.get('receives', 0):.2f} memory-stream "
        f"receives, {c.get('event_waits', 0):.2f} anyio.Event waits; "
        f"{c['events']:.2f} events in {c['commits']:.2f} commits"
    )
    if hops.by_task is not None:
        counted = COUNTED_SESSIONS * args.iterations
        for owner, n in hops.by_task.most_common(25):
            print(f"  {n / counted:6.2f} handles per iteration: {owner}")
    report(figures)


if __name__ == "__main__":
    anyio.run(main)
