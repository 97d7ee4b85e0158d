"""A real Navi server (uvicorn on 127.0.0.1, a free port) with the fake LLM server.

    def test_something(navi_server):          # the pytest fixture (see tests/conftest.py)
        navi_server.fake_llm.script(Reply(text="Hello"))
        httpx.get(navi_server.url + "/health")

The server runs on its own event loop in a thread, so sync tests (Playwright) and
async tests can both use it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from navi.config import Settings
from navi.server.app import create_app
from navi.server.auth import Users
from navi.server.ws import MAX_FRAME_BYTES, PING_INTERVAL_S, PING_TIMEOUT_S
from tests.support.fake_llm import FakeLLMServer
from tests.support.helpers import SERVER_START_S, free_port
from tests.support.navi_app import check_every_log_in, navi_settings


@dataclass
class RunningServer:
    url: str
    ws_url: str
    fake_llm: FakeLLMServer
    settings: Settings
    root: Path
    server: uvicorn.Server


@contextmanager
def run_server(
    root: Path,
    fake: FakeLLMServer,
    *,
    users: Users | None = None,
    port: int | None = None,
    **overrides: Any,
) -> Iterator[RunningServer]:
    overrides.setdefault("resume_on_start", True)
    # Scripted replies stay simple: a test that wants planning passes planning="on".
    overrides.setdefault("planning", "off")
    if port is not None:  # the settings name the port it listens on (links to itself)
        overrides.setdefault("port", port)
    settings = navi_settings(root, fake.url, **overrides)
    app = create_app(settings, env={}, users=users)
    port = port or free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        ws="websockets-sansio",
        ws_max_size=MAX_FRAME_BYTES,  # as navi serve
        ws_ping_interval=PING_INTERVAL_S,
        ws_ping_timeout=PING_TIMEOUT_S,
        # Compressing every small frame costs more CPU than a local link saves.
        ws_per_message_deflate=False,
        log_level="warning",
        lifespan="on",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"navi-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + SERVER_START_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the Navi server did not start")
        time.sleep(0.02)
    try:
        yield RunningServer(
            url=f"http://127.0.0.1:{port}",
            ws_url=f"ws://127.0.0.1:{port}",
            fake_llm=fake,
            settings=settings,
            root=root,
            server=server,
        )
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    check_every_log_in(settings.database_url)  # after a test that passed


@contextmanager
def navi_server_for(root: Path, **overrides: Any) -> Iterator[RunningServer]:
    with FakeLLMServer.in_thread() as fake, run_server(root, fake, **overrides) as running:
        yield running


def stop_and_wait(server: uvicorn.Server) -> None:
    """Stop a server ``run_server`` started and wait until its port refuses connections."""
    server.should_exit = True
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", server.config.port), timeout=0.2).close()
        except OSError:
            return
        time.sleep(0.05)
    raise AssertionError("the server did not stop")
