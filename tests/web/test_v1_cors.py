"""A page of another origin listed in ``NAVI_ALLOWED_ORIGINS`` calls ``/v1`` from
Chromium (CORS, navi/server/openai/edge.py): the preflight passes, the answer is read,
and an unknown ``/v1`` URL answers a 404 the page can read too."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.security.conftest import NaviServerProcess, StartNavi, start_module_navi
from tests.support.fake_llm_script import Reply
from tests.web.conftest import TIMEOUT_MS

__all__ = ["start_module_navi"]

TOKEN = "v1-cors-admin-5b2e7c19d4"
PAGE = b"<!doctype html><title>other app</title><p>another origin</p>"


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def _site() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 with a port of its own: another origin."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def listed_site() -> Iterator[str]:
    with _site() as url:
        yield url


@pytest.fixture
def unlisted_site() -> Iterator[str]:
    with _site() as url:
        yield url


# One `navi serve` for the module (a process start costs seconds): it lists one origin;
# the other test's page comes from an origin it does not list.
@pytest.fixture(scope="module")
def server(start_module_navi: StartNavi, listed_site: str) -> NaviServerProcess:
    return start_module_navi(
        users=[{"id": "admin", "token": TOKEN, "role": "admin"}],
        env={"NAVI_ALLOWED_ORIGINS": listed_site},
        canary_row=False,
    )


CALL = """async ([url, token, path, body]) => {
  const response = await fetch(url + path, {
    method: body ? "POST" : "GET",
    headers: {"Authorization": "Bearer " + token, "Content-Type": "application/json",
              "X-Stainless-Lang": "js"},
    body: body ? JSON.stringify(body) : undefined,
  });
  return {status: response.status, body: await response.json(),
          session: response.headers.get("x-navi-session")};
}"""

FAILS = """async ([url, token]) => {
  try {
    await fetch(url + "/v1/models", {headers: {"Authorization": "Bearer " + token}});
    return "read";
  } catch (error) { return "blocked"; }
}"""


def test_a_page_of_a_listed_origin_calls_v1(
    browser: Any, server: NaviServerProcess, listed_site: str
) -> None:
    server.llm.script(Reply(text="Hello from Navi."))
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(listed_site + "/")
        body = {"model": "navi/secretary", "messages": [{"role": "user", "content": "hi"}]}
        answer = page.evaluate(CALL, [server.url, TOKEN, "/v1/chat/completions", body])
        assert answer["status"] == 200, answer
        assert answer["body"]["choices"][0]["message"]["content"] == "Hello from Navi."
        assert answer["session"]  # an exposed header
        lost = page.evaluate(CALL, [server.url, TOKEN, "/v1/chat/completion", body])
        assert lost["status"] == 404 and lost["body"]["error"]["type"] == "invalid_request_error"
        assert "Invalid URL (POST /v1/chat/completion)" in lost["body"]["error"]["message"]
    finally:
        context.close()


def test_a_page_of_an_unlisted_origin_cannot_read_v1(
    browser: Any, server: NaviServerProcess, unlisted_site: str
) -> None:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(unlisted_site + "/")
        assert page.evaluate(FAILS, [server.url, TOKEN]) == "blocked"
    finally:
        context.close()
