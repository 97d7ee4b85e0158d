"""``navi serve`` and ``navi state-diagram``."""

from __future__ import annotations

import argparse
import errno
import gc
import socket
import sys
from pathlib import Path
from typing import Any

from navi.cli.common import PRIVATE_URLS_WARNING, settings_for
from navi.config import Settings


def add_commands(sub: Any) -> None:
    serve = sub.add_parser("serve", help="start the server (REST, WebSocket, web client)")
    serve.add_argument("--host", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8000)")
    serve.add_argument(
        "--db",
        help="database: a SQLite file's path or a URL (sqlite:///PATH, postgresql://…); "
        "default navi.db in the data folder (NAVI_DATA_DIR)",
    )
    serve.set_defaults(func=cmd_serve)

    diagram = sub.add_parser("state-diagram", help="print the run state machine (Mermaid)")
    diagram.set_defaults(func=cmd_state_diagram)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from navi.logs import configure_logging
    from navi.server.app import create_app
    from navi.server.auth import AuthConfigError
    from navi.server.ws import MAX_FRAME_BYTES, PING_INTERVAL_S, PING_TIMEOUT_S

    settings, env = settings_for(args)
    refused = _cannot_listen(settings.host, settings.port)
    if refused:  # said before anything claims to start
        sys.stderr.write(f"navi: {refused}\n")
        return 1
    configure_logging(settings.log_level)
    _log_data_dir(settings)
    _log_sandbox(settings)
    try:
        app = create_app(settings, env=env, on_started=freeze_startup_objects)
    except AuthConfigError as exc:
        sys.stderr.write(f"navi: {exc}\n")
        return 2
    data = f" (data folder {settings.data_dir})" if settings.data_dir else ""
    sys.stderr.write(f"Navi is starting at http://{settings.host}:{settings.port}{data}\n")
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        ws="websockets-sansio",
        # Frames past the largest message are refused unread (navi/server/ws.py).
        ws_max_size=MAX_FRAME_BYTES,
        # A busy loop answers pings late: a longer wait before a socket is deemed dead.
        ws_ping_interval=PING_INTERVAL_S,
        ws_ping_timeout=PING_TIMEOUT_S,
        # Compressing every small frame costs more CPU than a local link saves.
        ws_per_message_deflate=False,
        log_level=settings.log_level.lower(),
        # uvicorn's own loggers (access and error) propagate to the root handler that
        # configure_logging set up: one format, query strings redacted.
        log_config=None,
        lifespan="on",
        # Open requests (a long turn over REST) must not hold a shutdown forever;
        # unfinished runs resume at the next start.
        timeout_graceful_shutdown=5,
    )
    return 0


def _cannot_listen(host: str, port: int) -> str | None:
    """Why Navi cannot listen at ``host:port`` (a port in use, an address not this
    machine's), found by binding it as uvicorn will; None if it can."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            sock.bind((host.strip("[]"), port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (
                    f"port {port} is already in use on {host} (is Navi already running?): "
                    "stop that program, or choose another port with --port or NAVI_PORT"
                )
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None


def _log_data_dir(settings: Settings) -> None:
    """Make the data folder, and say where it is, where the database is, and what of an
    older install is in use."""
    import structlog

    from navi.data_dir import prepare
    from navi.llm.errors import redact_url

    log = structlog.get_logger("navi.data")
    if settings.data_dir:
        prepare(Path(settings.data_dir), settings.tools.tools_path)
    log.info("navi.data_dir", path=settings.data_dir, database=redact_url(settings.database_url))
    for note in settings.data_notes:
        log.warning("navi.data_dir", note=note)


def _log_sandbox(settings: Settings) -> None:
    """Say at start-up whether code_exec and terminal run sandboxed (a warning if not)."""
    import structlog

    from navi.run.approval import approval_report
    from tools.sandbox import sandbox_report

    level, text = sandbox_report(settings.tools.unsandboxed_tools, settings.tools.sandbox_user)
    log = structlog.get_logger("navi.sandbox")
    say = {"ok": log.info, "warning": log.warning}.get(level, log.error)
    say("tools.sandbox", status=text)  # error: code_exec and terminal refuse to run
    if settings.tools.allow_private_urls:
        log.warning("tools.outbound", status=PRIVATE_URLS_WARNING)
    level, text = approval_report(settings.tool_approval)
    (log.info if level == "ok" else log.warning)("tools.approval", status=text)


def freeze_startup_objects() -> None:
    """Move everything alive after start-up (modules, classes, profiles, tool schemas:
    ~100,000 objects, none of them garbage) out of the cyclic collector's reach. A full
    collection then scans only what the server has made since: without this, each one
    paused the event loop for 50-75 ms (measured in bench/loop.py), a latency spike in
    every stream that it hit."""
    gc.collect()
    gc.freeze()


def cmd_state_diagram(args: argparse.Namespace) -> int:
    from navi.run.state import mermaid

    sys.stdout.write(mermaid() + "\n")
    return 0
