"""The cost of one LLM stream read: one session, one chunk per network read, as a real
model streams (not in bursts), and the cost of one whole call.

A tiny HTTP/1.1 server runs in its own process (pinned to another core when there is
one): it answers every POST with Ollama NDJSON, one chunk per chunked-encoding write
and a pause after each (``--pace-us``), long enough for the client to have read it,
so every read carries exactly one chunk (the readers count reads to check it). This
process (pinned to one core) reads with each client in turn, alternated ``--rounds``
times; the figure is this process's CPU time (user + system) per 100 chunks, median
of the rounds, and the chunks per second one core could read at that cost. On a busy
machine chunks that arrive while this process waits for a core are merged into one
read by aiohttp's buffer (not by httpx's): the bare clients also say their reads per
chunk and their CPU per 100 reads.

Clients: ``navi`` is Navi's own backend (``OllamaBackend.stream_complete``: the
client built by navi.llm.http, the stream guard and the NDJSON parser); the others
are bare clients reading bytes, for comparison: httpx as Navi used it (its default
transport), httpx on the ``httpx-aiohttp`` transport, httpx2 (the OpenAI and MCP
SDKs' fork, if installed) and aiohttp alone. "per call" is the CPU of one POST whose
answer is one chunk, on a kept-alive connection.

    .venv/bin/python bench/llm_read.py [--chunks 1000] [--rounds 3] [--calls 300]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress

import anyio
import httpx
from _common import ROOT, report

from navi.llm.ollama import OllamaBackend
from navi.llm.settings import LLMSettings
from navi.llm.types import ChatMessage, TextPiece

LINE = (
    b'{"model":"m","created_at":"2026-01-01T00:00:00Z",'
    b'"message":{"role":"assistant","content":"tok "},"done":false}\n'
)
FINAL = (
    b'{"model":"m","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant",'
    b'"content":""},"done":true,"done_reason":"stop","prompt_eval_count":1,"eval_count":1}\n'
)
HELLO = [ChatMessage(role="user", content="hello")]
BODY = b'{"model":"m","messages":[{"role":"user","content":"hello"}],"stream":true}'

# Reads ``n`` and returns (chunks, reads) seen.
Reader = Callable[[str], Awaitable[tuple[int, int]]]


# ---------------------------------------------------------------- the server (own process)


def serve(port_file: str, chunks: int, pace: float) -> None:
    """Answer POSTs on 127.0.0.1: ``/one/…`` with one chunk, anything else with
    ``chunks`` chunks, each its own write followed by a ``pace`` s pause."""
    listener = socket.create_server(("127.0.0.1", 0))
    with open(port_file + ".new", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(port_file + ".new", port_file)  # (whole, never half written)
    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_answer_all, args=(conn, chunks, pace), daemon=True).start()


def _answer_all(conn: socket.socket, chunks: int, pace: float) -> None:
    with conn, suppress(OSError):
        _answer_requests(conn, chunks, pace)


def _answer_requests(conn: socket.socket, chunks: int, pace: float) -> None:
    buffer = b""
    while True:
        while b"\r\n\r\n" not in buffer:
            data = conn.recv(65536)
            if not data:
                return
            buffer += data
        head, buffer = buffer.split(b"\r\n\r\n", 1)
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(buffer) < length:
            buffer += conn.recv(65536)
        buffer = buffer[length:]
        n = 1 if head.split(b" ", 2)[1].startswith(b"/one/") else chunks
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        piece = b"%x\r\n%b\r\n" % (len(LINE), LINE)
        for _ in range(n):
            conn.sendall(piece)
            if n > 1:
                time.sleep(pace)
        conn.sendall(b"%x\r\n%b\r\n0\r\n\r\n" % (len(FINAL), FINAL))


# ---------------------------------------------------------------- the clients


def pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and cpu < (os.cpu_count() or 1):
        os.sched_setaffinity(0, {cpu})


def _count(data: bytes) -> int:
    return data.count(b'"done":false')


@asynccontextmanager
async def httpx_reader(client: httpx.AsyncClient) -> AsyncIterator[Reader]:
    async def read(url: str) -> tuple[int, int]:
        chunks = reads = 0
        async with client.stream("POST", url, content=BODY) as response:
            async for data in response.aiter_bytes():
                reads += 1
                chunks += _count(data)
        return chunks, reads

    async with client:
        yield read


def httpx_default() -> AbstractAsyncContextManager[Reader]:
    timeout = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=None)
    return httpx_reader(httpx.AsyncClient(timeout=timeout))


def httpx_on_aiohttp() -> AbstractAsyncContextManager[Reader]:
    from httpx_aiohttp import AiohttpTransport

    timeout = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=None)
    return httpx_reader(httpx.AsyncClient(timeout=timeout, transport=AiohttpTransport()))


@asynccontextmanager
async def httpx2_client() -> AsyncIterator[Reader]:
    import httpx2

    timeout = httpx2.Timeout(connect=10.0, read=None, write=60.0, pool=None)
    async with httpx2.AsyncClient(timeout=timeout) as client:

        async def read(url: str) -> tuple[int, int]:
            chunks = reads = 0
            async with client.stream("POST", url, content=BODY) as response:
                async for data in response.aiter_bytes():
                    reads += 1
                    chunks += _count(data)
            return chunks, reads

        yield read


@asynccontextmanager
async def aiohttp_alone() -> AsyncIterator[Reader]:
    import aiohttp

    async with aiohttp.ClientSession() as session:

        async def read(url: str) -> tuple[int, int]:
            chunks = reads = 0
            async with session.post(url, data=BODY) as response:
                async for data in response.content.iter_any():
                    reads += 1
                    chunks += _count(data)
            return chunks, reads

        yield read


@asynccontextmanager
async def navi_backend() -> AsyncIterator[Reader]:
    settings = LLMSettings(first_chunk_timeout=30.0, chunk_timeout=30.0)
    backends: dict[str, OllamaBackend] = {}

    async def read(url: str) -> tuple[int, int]:
        base = url.removesuffix("/api/chat")
        if base not in backends:
            backends[base] = OllamaBackend(settings, url=base, model="m")
        pieces = 0
        async for chunk in backends[base].stream_complete(HELLO):
            if type(chunk) is TextPiece:
                pieces += 1
        return pieces, pieces  # (reads are checked by the bare clients)

    try:
        yield read
    finally:
        for backend in backends.values():
            await backend.aclose()


CLIENTS: dict[str, Callable[[], AbstractAsyncContextManager[Reader]]] = {
    "navi": navi_backend,
    "httpx": httpx_default,
    "httpx_aiohttp": httpx_on_aiohttp,
    "httpx2": httpx2_client,
    "aiohttp": aiohttp_alone,
}
MODULES = {"httpx_aiohttp": "httpx_aiohttp", "httpx2": "httpx2", "aiohttp": "aiohttp"}


# ---------------------------------------------------------------- the measurement


async def measure(name: str, url: str, chunks: int, calls: int) -> tuple[float, float, float]:
    """(CPU ms per 100 streamed chunks, CPU ms per call, reads per chunk)."""
    async with CLIENTS[name]() as read:
        await read(f"{url}/one/api/chat")  # connect, warm up
        start = time.process_time()
        got, reads = await read(f"{url}/api/chat")
        stream_cpu = time.process_time() - start
        assert got == chunks, (name, got, chunks)
        start = time.process_time()
        for _ in range(calls):
            await read(f"{url}/one/api/chat")
        call_cpu = time.process_time() - start
    # (The final line is a read of its own: 1 + 1/chunks when every chunk is one read.)
    return stream_cpu / chunks * 100 * 1000, call_cpu / calls * 1000, reads / got


async def run(url: str, args: argparse.Namespace, names: list[str]) -> dict[str, object]:
    per_read: dict[str, list[float]] = {n: [] for n in names}
    per_call: dict[str, list[float]] = {n: [] for n in names}
    reads: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(args.rounds):
        for name in names:
            read_ms, call_ms, per_chunk = await measure(name, url, args.chunks, args.calls)
            per_read[name].append(read_ms)
            per_call[name].append(call_ms)
            reads[name].append(per_chunk)
    figures: dict[str, object] = {"chunks": args.chunks, "rounds": args.rounds}
    for name in names:
        cpu100 = statistics.median(per_read[name])
        call = statistics.median(per_call[name])
        rate = 100 / cpu100 * 1000
        figures[f"{name}_cpu_ms_per_100_chunks"] = cpu100
        figures[f"{name}_chunks_per_s"] = round(rate)
        figures[f"{name}_cpu_ms_per_call"] = call
        line = (
            f"{name:14} {cpu100:6.2f} ms CPU per 100 chunks ({rate / 1000:5.1f}k chunks/s "
            f"per core), {call:5.3f} ms CPU per call"
        )
        if name != "navi":
            # Behind (a busy machine), aiohttp's buffer hands over the chunks that arrived
            # meanwhile in one read, httpx's one read each: the cost per read, too.
            per_chunk = statistics.median(reads[name])
            figures[f"{name}_cpu_ms_per_100_reads"] = cpu100 / per_chunk
            line += f"; {cpu100 / per_chunk:6.2f} ms per 100 reads, {per_chunk:.3f} reads/chunk"
        print(line)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--pace-us", type=int, default=1000, help="server pause per chunk")
    parser.add_argument("--serve", help=argparse.SUPPRESS)  # (the server process)
    args = parser.parse_args()
    if args.serve:
        pin(1)
        serve(args.serve, args.chunks, args.pace_us / 1e6)
        return
    names = [n for n in CLIENTS if n not in MODULES or importlib.util.find_spec(MODULES[n])]
    with tempfile.TemporaryDirectory() as directory:
        port_file = os.path.join(directory, "port")
        server = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve",
                port_file,
                "--chunks",
                str(args.chunks),
                "--pace-us",
                str(args.pace_us),
            ],
            cwd=ROOT,
        )
        try:
            port = wait_for_port(port_file)
            pin(0)
            print(
                f"one session, {args.chunks} chunks one per read ({args.pace_us} µs apart), "
                f"{args.rounds} rounds alternated, load {os.getloadavg()[0]:.2f}"
            )
            report(anyio.run(run, f"http://127.0.0.1:{port}", args, names))
        finally:
            server.terminate()
            server.wait()


def wait_for_port(port_file: str) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(port_file) as f:
                return int(f.read())
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    raise RuntimeError("the bench server did not start")


if __name__ == "__main__":
    main()
