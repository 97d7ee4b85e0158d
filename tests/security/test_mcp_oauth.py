"""The MCP sign-in routes as an attacker meets them (navi/server/mcp_auth_routes.py):
without a token the sign-in routes are a 401 and a user who is not an admin gets a 403;
the public callback lets in only the state of a waiting sign-in, once: a wrong, missing,
oversized or replayed state is refused with one answer that names no server, and
nothing connects; the sign-in still works after the refusals, and no token of it
reaches a log line or a session export."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from tests.navi.mcp.oauth_server import oauth_mcp_server
from tests.navi.mcp.support import write_config
from tests.security.conftest import NaviServerProcess, StartNavi
from tests.support.fake_llm_script import FakeToolCall, Reply

pytest.importorskip("mcp")

ADMIN = "admin-token-" + "a" * 20
USER = "user-token-" + "u" * 20
USERS = [
    {"id": "admin", "token": ADMIN, "role": "admin"},
    {"id": "user", "token": USER, "role": "user"},
]


def _wait(check: Callable[[], bool], limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _waiting(server: NaviServerProcess) -> list[dict[str, Any]]:
    with server.client(token=ADMIN) as http:
        found: list[dict[str, Any]] = http.get("/mcp/sign-ins").json()["servers"]
        return found


def _tools(server: NaviServerProcess) -> set[str]:
    with server.client(token=ADMIN) as http:
        return {t["name"] for t in http.get("/agents/tools").json()}


def test_sign_in_routes_callback_states_and_secrets(tmp_path: Any, start_navi: StartNavi) -> None:
    with oauth_mcp_server() as remote:
        config = write_config(tmp_path / "mcp.json", {"remote": {"url": remote.url}})
        server = start_navi(
            users=USERS, token=ADMIN, canary_row=False, env={"NAVI_MCP_CONFIG": str(config)}
        )
        _wait(lambda: bool(_waiting(server)))

        # Who may start a sign-in: an admin only; without a token, nobody learns anything.
        for path in ("/mcp/sign-ins", "/mcp/remote/sign-in", "/mcp/nosuch/sign-in"):
            assert httpx.get(server.url + path).status_code == 401
            with server.client(token=USER) as user:
                assert user.get(path).status_code == 403
        with server.client(token=ADMIN) as admin:
            assert admin.get("/mcp/nosuch/sign-in").status_code == 404
            link = admin.get("/mcp/remote/sign-in")
        assert link.status_code == 303
        assert link.headers["cache-control"] == "no-store"

        # The authorization server approves and sends the browser back with code and state.
        back = httpx.get(link.headers["location"])
        assert back.status_code == 302
        callback = back.headers["location"]
        query = {k: v[0] for k, v in parse_qs(urlsplit(callback).query).items()}
        base = server.url + "/mcp/oauth/callback"
        refusals = [
            {"code": query["code"], "state": "x" * 43},
            {"code": query["code"], "state": query["state"][:-1]},
            {"code": query["code"]},
            {"code": query["code"], "state": ""},
            {"state": query["state"]},  # no code, no error: not an answer
            {"code": query["code"], "state": query["state"] + "a" * 5000},
            {"error": "access_denied", "state": "remote"},
        ]
        answers = [httpx.get(base + "?" + urlencode(q)) for q in refusals]
        assert {a.status_code for a in answers} == {400}
        assert len({a.text for a in answers}) == 1
        assert "remote" not in answers[0].text and "unknown, used or expired" in answers[0].text
        # Nothing connected, and the sign-in still waits.
        assert [w["name"] for w in _waiting(server)] == ["remote"]
        assert "mcp__remote__echo" not in _tools(server)

        done = httpx.get(callback)
        assert done.status_code == 200 and "Navi is connecting to remote" in done.text
        replayed = httpx.get(callback)
        assert replayed.status_code == 400 and replayed.text == answers[0].text
        _wait(lambda: "mcp__remote__echo" in _tools(server))
        assert remote.provider.authorizations == 1

        server.llm.script(
            Reply(tool_calls=[FakeToolCall(name="mcp__remote__echo", arguments={"text": "x"})]),
            Reply(text="done"),
        )
        sid = server.create_session()
        assert server.send(sid, "go").status_code == 200
        assert remote.calls == ["x"]
        with server.client(token=ADMIN) as admin:
            export = admin.get(f"/sessions/{sid}/export").content.decode("utf-8", "replace")
        secrets = [*remote.provider.access, *remote.provider.refresh, query["code"]]
        for text in (server.logs(), export):
            assert not [s for s in secrets if s in text]
        assert query["state"] not in server.logs()
