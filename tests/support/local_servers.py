"""Real local servers for tests: an HTTP server and an SSH server, both on 127.0.0.1 only.

``LocalHTTPServer`` runs the stdlib's threading HTTP server in a background thread, so
it works with any event loop. ``local_ssh_server`` runs asyncssh's server in the test's
own loop and executes commands for real in a subprocess.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import struct
import sys
import threading
import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import asyncssh

HTML_PAGE = """<!doctype html>
<html><head><title>Navi test page</title>
<style>body { color: red; }</style>
<script>var secret = "do not show";</script></head>
<body>
<nav><a href="/home">Home</a> <a href="/about">About us</a></nav>
<main>
<h1>Main heading</h1>
<p>First   paragraph with
   <b>bold</b> text and a <a href="/data.json">data link</a>.</p>
<ul><li>item one</li><li>item two</li></ul>
<h2>Second heading</h2>
<p>Caf&eacute; &amp; cr&egrave;me</p>
</main>
<footer>footer text</footer>
</body></html>
"""


def tiny_png(width: int = 2, height: int = 2) -> bytes:
    """A valid PNG, made here so no binary fixture file is needed."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class _State:
    requests: list[RecordedRequest] = field(default_factory=list)
    closing: threading.Event = field(default_factory=threading.Event)
    search_results: list[dict[str, Any]] = field(default_factory=list)


def _make_handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in headers.items():
                self.send_header(key.replace("_", "-"), value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            parts = urlsplit(self.path)
            state.requests.append(
                RecordedRequest(self.command, self.path, dict(self.headers.items()), body)
            )
            route = parts.path
            if route == "/page.html":
                self._send(200, HTML_PAGE.encode(), "text/html; charset=utf-8")
            elif route == "/plain.txt":
                self._send(200, b"just text\n", "text/plain")
            elif route == "/data.json":
                self._send(200, b'{"name": "navi", "items": [1, 2]}', "application/json")
            elif route == "/echo":
                echoed = {
                    "method": self.command,
                    "headers": dict(self.headers.items()),
                    "body": body.decode("utf-8", "replace"),
                }
                self._send(200, json.dumps(echoed).encode(), "application/json")
            elif re.fullmatch(r"/status/\d{3}", route):
                code = int(route.rsplit("/", 1)[1])
                self._send(code, f"status {code}".encode(), "text/plain")
            elif route == "/big":
                size = int(parse_qs(parts.query).get("bytes", ["200000"])[0])
                self._send(200, b"x" * size, "text/plain")
            elif route == "/slow":
                delay = float(parse_qs(parts.query).get("s", ["5"])[0])
                deadline = time.monotonic() + delay
                while time.monotonic() < deadline and not state.closing.is_set():
                    time.sleep(0.05)
                self._send(200, b"late", "text/plain")
            elif route == "/image.png":
                self._send(200, tiny_png(), "image/png")
            elif route == "/not-an-image":
                self._send(200, b"hello, not an image", "image/png")
            elif route == "/binary":
                self._send(200, bytes(range(256)) * 4, "application/octet-stream")
            elif route == "/redirect":
                self._send(302, b"", "text/plain", Location="/page.html")
            elif route == "/loop":
                self._send(302, b"", "text/plain", Location="/loop")
            elif route == "/search":
                query = parse_qs(parts.query)
                if query.get("format") != ["json"]:
                    self._send(403, b"Forbidden", "text/plain")
                    return
                results = state.search_results or [
                    {
                        "title": f"Result {i} for {query['q'][0]}",
                        "url": f"https://example.org/{i}",
                        "content": f"Snippet   number {i}",
                    }
                    for i in range(1, 9)
                ]
                payload = {"query": query["q"][0], "results": results}
                self._send(200, json.dumps(payload).encode(), "application/json")
            else:
                self._send(404, b"not found", "text/plain")

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout test) leaves a broken pipe: expected, not news.
        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError | TimeoutError):
            super().handle_error(request, client_address)


class LocalHTTPServer:
    """``with LocalHTTPServer() as server: server.url("/page.html")``."""

    def __init__(self) -> None:
        self._state = _State()
        self._server = _QuietServer(("127.0.0.1", 0), _make_handler(self._state))
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def requests(self) -> list[RecordedRequest]:
        return self._state.requests

    @property
    def search_results(self) -> list[dict[str, Any]]:
        return self._state.search_results

    def url(self, path: str = "/") -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{path}"

    def __enter__(self) -> LocalHTTPServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._state.closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


# ---------------------------------------------------------------- SSH


@dataclass
class LocalSSHServer:
    port: int
    username: str
    password: str
    client_key_file: Path
    commands: list[str]

    def hosts_entry(self, *, use_key: bool = False) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": self.port,
            "username": self.username,
            "known_hosts": None,
        }
        if use_key:
            entry["key_file"] = str(self.client_key_file)
        else:
            entry["password"] = self.password
        return entry


@contextlib.asynccontextmanager
async def local_ssh_server(
    workdir: Path, *, username: str = "navi", password: str = "secret"
) -> AsyncIterator[LocalSSHServer]:
    """An SSH server on 127.0.0.1 that runs each command in a real subprocess."""
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    key_file = workdir / "client_key"
    client_key.write_private_key(str(key_file))
    authorized = asyncssh.import_authorized_keys(client_key.export_public_key().decode())
    commands: list[str] = []
    running: set[asyncio.subprocess.Process] = set()
    handlers_idle = asyncio.Event()
    handlers_idle.set()
    active = 0

    class Server(asyncssh.SSHServer):
        def begin_auth(self, user: str) -> bool:
            return True

        def password_auth_supported(self) -> bool:
            return True

        def validate_password(self, user: str, given: str) -> bool:
            return user == username and given == password

        def public_key_auth_supported(self) -> bool:
            return True

        def validate_public_key(self, user: str, key: asyncssh.SSHKey) -> bool:
            return (
                user == username and authorized.validate(key, "127.0.0.1", "127.0.0.1") is not None
            )

    async def handle(process: asyncssh.SSHServerProcess[str]) -> None:
        nonlocal active
        active += 1
        handlers_idle.clear()
        command = process.command or ""
        commands.append(command)
        child = await asyncio.create_subprocess_shell(
            command,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        running.add(child)
        try:
            output, _ = await child.communicate()
            with contextlib.suppress(Exception):
                process.stdout.write(output.decode("utf-8", "replace"))
                process.exit(child.returncode or 0)
        finally:
            running.discard(child)
            active -= 1
            if active == 0:
                handlers_idle.set()

    server = await asyncssh.create_server(
        Server,
        "127.0.0.1",
        0,
        server_host_keys=[host_key],
        process_factory=handle,
    )
    port = server.sockets[0].getsockname()[1]
    try:
        yield LocalSSHServer(port, username, password, key_file, commands)
    finally:
        for child in list(running):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(handlers_idle.wait(), 5)
        server.close()
        await server.wait_closed()


def write_hosts_file(path: Path, hosts: dict[str, dict[str, Any]]) -> Path:
    path.write_text(json.dumps(hosts), encoding="utf-8")
    return path
