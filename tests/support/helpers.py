"""The small helpers many test files need, kept once here.

- :func:`free_port`: a TCP port on 127.0.0.1 nobody listens on (for a server a test
  starts; under pytest-xdist every worker asks the kernel, so workers never share one).
- :func:`closed_port_url`: a URL on 127.0.0.1 where nothing listens.
- :func:`drain`: everything an async iterator yields (an LLM stream's chunks).
- :func:`wait_until`: until a condition holds, checked every few milliseconds, within a
  limit (for state that announces nothing: a process, a file, another thread's object).
- :func:`poll_until`: the same for synchronous tests (a ``navi serve`` process, Playwright).
- :func:`wait_for_events`: until a session's log holds ``count`` events of a type, woken
  by the store's own notification of each commit (no polling).
- :func:`wait_until_serving`: until a server a test started answers ``GET url`` with 200,
  failing at once if its process has exited.
"""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing
from typing import Any, Protocol, TypeVar

import anyio
import httpx

from events.envelope import Recorded
from events.store import EventStore

__all__ = [
    "SERVER_START_S",
    "answering_http",
    "closed_port_url",
    "drain",
    "free_port",
    "interface_address",
    "poll_until",
    "wait_for_events",
    "wait_until",
    "wait_until_serving",
]

T = TypeVar("T")

# How long a server a test starts may take to answer. A fail-safe, not a measure: on a
# shared 2-core machine, or beside another pytest worker, a `navi serve` start (imports,
# database, tools) has taken over 30 s; one that dies is reported at once.
SERVER_START_S = 120.0


class _Process(Protocol):
    def poll(self) -> int | None: ...


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def closed_port_url() -> str:
    """An ``http://127.0.0.1:port`` URL where nothing listens (a server that is away)."""
    return f"http://127.0.0.1:{free_port()}"


async def drain(stream: AsyncIterator[T]) -> list[T]:
    return [item async for item in stream]


async def wait_until(
    condition: Callable[[], Any], *, limit_s: float = 30.0, every_s: float = 0.02
) -> None:
    """Return once ``condition()`` is true; fail (``TimeoutError``) after ``limit_s``."""
    with anyio.fail_after(limit_s):
        while not condition():
            await anyio.sleep(every_s)


def poll_until(
    condition: Callable[[], Any], what: str, *, limit_s: float = 30.0, every_s: float = 0.05
) -> None:
    """Return once ``condition()`` is true; fail (``AssertionError`` naming ``what``, the
    thing awaited) after ``limit_s``. A limit, not a wait: it returns the moment it holds."""
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"never happened within {limit_s:g} s: {what}"
        time.sleep(every_s)


async def wait_for_events(
    store: EventStore, session_id: str, kind: str, count: int = 1, *, limit_s: float = 20.0
) -> list[Recorded]:
    """The session's records once its log holds ``count`` events of type ``kind`` (e.g.
    ``"run.completed"``); fails (``TimeoutError``) after ``limit_s``."""
    seen = 0
    with anyio.fail_after(limit_s):
        async with aclosing(store.subscribe(session_id)) as stream:
            async for record in stream:
                seen += record.type == kind
                if seen >= count:
                    return await store.read(session_id)
    raise AssertionError(f"the log of {session_id} ended before {count} {kind} events")


def wait_until_serving(
    url: str,
    process: _Process | None = None,
    *,
    log: Callable[[], str] = lambda: "",
    limit_s: float = SERVER_START_S,
) -> None:
    """Return once ``GET url`` answers 200; fail (``AssertionError``, with ``log()``) if
    ``process`` exits first or after ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the server exited (code {process.poll()}):\n{log()}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"the server did not answer {url} within {limit_s:g} s:\n{log()}")


def interface_address() -> str | None:
    """This machine's address on its way out (no packet is sent), None if only loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.123", 9))
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") else address


@contextlib.contextmanager
def answering_http(host: str) -> Iterator[tuple[int, list[str]]]:
    """A server on ``host`` answering 200 to any GET: (its port, the paths it was asked)."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((host, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], asked
    finally:
        server.shutdown()
        server.server_close()
