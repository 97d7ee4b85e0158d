"""One log format for Navi's lines and every library's, with the bound ids and without
secrets in URLs."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import structlog

from navi.log_redaction import hide_values, redact_text
from navi.logs import configure_logging
from tests.support.fake_llm import FakeLLMServer


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    config = structlog.get_config()
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.configure(**config)
    structlog.contextvars.clear_contextvars()


def _lines(err: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in err.splitlines()]


def test_navi_and_library_lines_share_one_json_format_and_the_bound_ids(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("INFO", json=True)
    with structlog.contextvars.bound_contextvars(session_id="s-1", run_id="r-1", step=3):
        structlog.get_logger().info("run.step", tool="echo")
        logging.getLogger("some.library").warning("disk %s is slow", "sda")
    logging.getLogger("some.library").debug("below the level")
    navi, library = _lines(capsys.readouterr().err)
    assert navi["event"] == "run.step" and navi["tool"] == "echo"
    assert library["event"] == "disk sda is slow" and library["logger"] == "some.library"
    for line, level in ((navi, "info"), (library, "warning")):
        assert line["session_id"] == "s-1" and line["run_id"] == "r-1" and line["step"] == 3
        assert line["level"] == level and line["timestamp"].endswith("Z")


def test_uvicorn_lines_have_their_query_values_redacted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("INFO", json=True)
    access = logging.getLogger("uvicorn.access")
    access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET", "/x?token=abc&after=2", "1.1", 200)
    logging.getLogger("uvicorn.error").info(
        '%s - "WebSocket %s" %s', "127.0.0.1:5", "/ws/sessions/1?ticket=t0p", "403"
    )
    (http, ws) = _lines(capsys.readouterr().err)
    assert http["event"] == '127.0.0.1:5 - "GET /x?token=[redacted]&after=2 HTTP/1.1" 200'
    assert ws["event"] == '127.0.0.1:5 - "WebSocket /ws/sessions/1?ticket=[redacted]" 403'


def test_secrets_in_navi_values_and_in_tracebacks_are_redacted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("INFO", json=True)
    log = structlog.get_logger()
    log.info("llm.request", url="https://me:hunter2@llm.example/v1?key=sk-123")
    try:
        httpx.Response(
            401, request=httpx.Request("GET", "https://x.test/a?key=sk-456")
        ).raise_for_status()
    except httpx.HTTPStatusError:
        log.exception("llm.failed")
        logging.getLogger("httpx").exception("also failed")
    err = capsys.readouterr().err
    for secret in ("hunter2", "sk-123", "sk-456"):
        assert secret not in err
    first, second, third = _lines(err)
    assert first["url"] == "https://me:[redacted]@llm.example/v1?key=[redacted]"
    assert "HTTPStatusError" in second["exception"] and "?key=[redacted]" in second["exception"]
    assert "?key=[redacted]" in third["exception"]


def test_the_console_format_is_one_format_too(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO", json=False)
    structlog.get_logger().info("navi.started", url="http://h/?token=abc")
    logging.getLogger("uvicorn.access").info("GET /health?token=abc")
    navi, library = capsys.readouterr().err.splitlines()
    assert "[info" in navi and "navi.started" in navi and "token=[redacted]" in navi
    assert "[info" in library and "uvicorn.access" in library and "token=[redacted]" in library


def test_configuring_again_replaces_navis_handler_and_keeps_others() -> None:
    other = logging.NullHandler()
    logging.getLogger().addHandler(other)
    configure_logging("INFO", json=True)
    configure_logging("WARNING", json=True)
    handlers = logging.getLogger().handlers
    assert other in handlers
    assert sum(type(h).__name__ == "_NaviHandler" for h in handlers) == 1
    assert logging.getLogger().level == logging.WARNING


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("GET /a?b=1", "GET /a?b=[redacted]"),
        ("GET /a?after=5&sub_after=x:1", "GET /a?after=5&sub_after=x:1"),
        ("/ws?secret", "/ws?[redacted]"),
        ("see https://h.test/p?q=private#frag", "see https://h.test/p?q=[redacted]#frag"),
        ('"postgresql://navi:pw@db/navi"', '"postgresql://navi:[redacted]@db/navi"'),
        ("is this a question? yes", "is this a question? yes"),
        ("mail me@example.com", "mail me@example.com"),
    ],
)
def test_redact_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_known_secret_values_are_hidden_in_text() -> None:
    hide_values({"tok-7f3a9c2e": "${A_TOKEN}", "tok-7f3a9c2e-long": "${LONGER}"})
    text = "GET http://127.0.0.1/tok-7f3a9c2e/mcp and tok-7f3a9c2e-long"
    assert redact_text(text) == "GET http://127.0.0.1/${A_TOKEN}/mcp and ${LONGER}"


@pytest.mark.parametrize(("level", "shown"), [("INFO", False), ("DEBUG", True)])
def test_httpx_request_lines_are_debug_lines(
    level: str, shown: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    library = logging.getLogger("httpx")
    before = library.level
    try:
        configure_logging(level, json=True)
        with FakeLLMServer.in_thread() as fake:
            assert httpx.get(f"{fake.url}/api/tags").status_code == 200
        library.warning("a real problem")
        events = [line["event"] for line in _lines(capsys.readouterr().err)]
    finally:
        library.setLevel(before)
    requests = [e for e in events if e.startswith("HTTP Request: GET ")]
    assert bool(requests) is shown
    assert "a real problem" in events
