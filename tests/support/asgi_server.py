"""Any ASGI app served for real by uvicorn on 127.0.0.1 (a free port, its own thread),
for tests of small inline apps that need HTTP and WebSockets as browsers speak them.

    with serve_asgi(app) as url:           # "http://127.0.0.1:PORT"
        httpx.get(url + "/")
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp

from tests.support.helpers import SERVER_START_S, free_port


@contextmanager
def serve_asgi(app: ASGIApp, port: int | None = None) -> Iterator[str]:
    """``port``: one the app already names in its URLs (an OAuth issuer), else a free one."""
    port = port or free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, ws="websockets-sansio", log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"asgi-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + SERVER_START_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def connect_to(url: str) -> socket.socket:
    """A TCP connection to the server of ``url`` (``http://127.0.0.1:PORT``), to send a
    request that names another host (``Host: evil.example``) over it."""
    host, _, port = url.removeprefix("http://").partition(":")
    return socket.create_connection((host, int(port)), timeout=10)
