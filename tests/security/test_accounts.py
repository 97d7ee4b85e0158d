"""Accounts, against a real ``navi serve`` with a users file: fail closed on every route,
tokens only in the header, single-use tickets for the WebSocket, hashed tokens,
``navi users add``, and roles that decide which tools a session's run may call."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from typing import Any

import anyio
import httpx
import pytest
from starlette.routing import Mount, Route, WebSocketRoute
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from navi.accounts import User, Users
from navi.config import Settings
from navi.server.app import create_app
from tests.security.conftest import NaviServerProcess, StartNavi, fresh
from tests.support.fake_llm_script import FakeToolCall, Reply

ADMIN_TOKEN = "admin-token-0123456789abcdef"
USER_TOKEN = "user-token-0123456789abcdef"
HASHED_TOKEN = "hashed-token-0123456789abcdef"
TICKET_SECRET = "ticket-secret-for-the-test-9f2c"
PUBLIC = {"/health", "/openapi.json", "/"}
# Public, and refusing a request without what lets it in (the MCP sign-in's state).
PUBLIC_REFUSING = {"/mcp/oauth/callback": 400}
USERS: list[dict[str, Any]] = [
    {"id": "alice", "token": ADMIN_TOKEN, "role": "admin"},
    {"id": "bob", "token": USER_TOKEN, "role": "user"},
    {"id": "carol", "token_sha256": hashlib.sha256(HASHED_TOKEN.encode()).hexdigest()},
]


def _start(start: StartNavi) -> NaviServerProcess:
    return start(
        users=USERS,
        token=ADMIN_TOKEN,
        env={"NAVI_WS_TICKET_SECRET": TICKET_SECRET, "NAVI_UNSANDBOXED_TOOLS": "1"},
    )


@pytest.fixture(scope="module")
def _shared_server(start_module_navi: StartNavi) -> NaviServerProcess:
    return _start(start_module_navi)


@pytest.fixture
def server(_shared_server: NaviServerProcess) -> NaviServerProcess:
    """The users file's server, shared by the tests that only ask it things."""
    return fresh(_shared_server)


@pytest.fixture(scope="module")
def _own_server(start_module_navi: StartNavi) -> NaviServerProcess:
    return _start(start_module_navi)


@pytest.fixture
def own_server(_own_server: NaviServerProcess) -> NaviServerProcess:
    """The same set-up apart from the shared one, for the two tests that change the users
    file (a user added: the other test's users are still there) or restart the server
    (the added user stays valid): a start each would cost seconds and prove nothing more."""
    return fresh(_own_server)


def _routes() -> list[tuple[str, str]]:
    """Every (method, path) of the app, path parameters filled with a fresh UUID."""
    app = create_app(Settings(), users=Users([], open_access=True))
    found = []
    for route in app.routes:
        if isinstance(route, Route):
            path = re.sub(r"\{[^}]+\}", str(uuid.uuid4()), route.path)
            found += [(m, path) for m in sorted(route.methods or ()) if m != "HEAD"]
        elif isinstance(route, WebSocketRoute):
            found.append(("WS", re.sub(r"\{[^}]+\}", str(uuid.uuid4()), route.path)))
        else:
            assert isinstance(route, Mount), route  # the web client's files
    assert len(found) > 20
    return found


def _ws_close_code(url: str, **kw: Any) -> int | None:
    """How the server closes a socket that it refuses (None: it did not)."""
    with connect(url, open_timeout=10, **kw) as ws:
        try:
            ws.recv(timeout=10)
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None
        except TimeoutError:
            return None
    return None


def _raw_get(server: NaviServerProcess, path: str) -> bytes:
    """The status line of a GET of ``path`` exactly as written (clients normalize it)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        return sock.makefile("rb").readline()


def _ticket(server: NaviServerProcess, token: str) -> str:
    response = httpx.post(
        f"{server.url}/auth/ws-ticket", headers={"authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["expires_in"] == 30 and response.headers["cache-control"] == "no-store"
    ticket: str = body["ticket"]
    return ticket


def _pong(ws: ClientConnection) -> bool:
    ws.send(json.dumps({"type": "ping"}))
    return bool(json.loads(ws.recv(timeout=10))["type"] == "pong")


def test_no_token_is_a_401_on_every_route_but_the_public_ones(server: NaviServerProcess) -> None:
    routes = _routes()
    with httpx.Client(base_url=server.url, timeout=30) as anonymous:
        for method, path in routes:
            if method == "WS":
                code = _ws_close_code(f"{server.ws_url}{path}")
                assert code == 4401, (path, code)
                continue
            response = anonymous.request(method, path, json={} if method != "GET" else None)
            if path in PUBLIC:
                assert response.status_code == 200, (method, path, response.text)
            elif path in PUBLIC_REFUSING:
                assert response.status_code == PUBLIC_REFUSING[path], (method, path)
            else:
                assert response.status_code == 401, (method, path, response.text)
                assert response.headers["www-authenticate"] == "Bearer"
        # The static client is public, a made-up path is not a way around the check.
        assert anonymous.get("/js/auth.js").status_code == 200
        for spelling in ("//sessions", "/SESSIONS", "/x/../sessions", "/%2e%2e/sessions"):
            assert _raw_get(server, spelling).startswith(b"HTTP/1.1 40"), spelling
        wrong = {"authorization": "Bearer not-a-token-of-anyone"}
        assert anonymous.get("/sessions", headers=wrong).status_code == 401


def test_a_route_added_later_is_private_by_default() -> None:
    """No prefix list to keep up to date: a route nobody marked public needs a user,
    and ``user_of`` never stands in a default (admin) user for a missing one."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    from navi.server.http import user_of

    async def whoami(request: Request) -> JSONResponse:
        return JSONResponse({"user": user_of(request).id})

    alice = User(id="alice", role="admin", token=ADMIN_TOKEN)
    app = create_app(Settings(), users=Users([alice], open_access=False))
    app.router.routes.insert(0, Route("/whoami", whoami))

    async def ask() -> tuple[httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            header = {"authorization": f"Bearer {ADMIN_TOKEN}"}
            return await http.get("/whoami"), await http.get("/whoami", headers=header)

    anonymous, known = anyio.run(ask)
    assert anonymous.status_code == 401
    assert known.json() == {"user": "alice"}


def test_a_token_in_the_url_is_refused_on_rest(server: NaviServerProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        refused = http.get("/sessions", params={"token": ADMIN_TOKEN})
        assert refused.status_code == 401 and "Authorization" in refused.json()["error"]
        # Even beside a valid header: a client that puts tokens in URLs must hear it.
        both = http.get(
            "/sessions",
            params={"token": ADMIN_TOKEN},
            headers={"authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert both.status_code == 401
        # A ticket is for a WebSocket, never for REST.
        ticket = _ticket(server, ADMIN_TOKEN)
        assert http.get("/sessions", params={"ticket": ticket}).status_code == 401
        header = {"authorization": f"Bearer {ADMIN_TOKEN}"}
        assert http.get("/sessions", headers=header).status_code == 200


def test_a_websocket_ticket_works_once_for_its_own_user(server: NaviServerProcess) -> None:
    sid = server.canary_session  # alice's
    url = f"{server.ws_url}/ws/sessions/{sid}"
    ticket = _ticket(server, ADMIN_TOKEN)
    with connect(f"{url}?ticket={ticket}", open_timeout=10) as ws:
        assert _pong(ws)
    assert _ws_close_code(f"{url}?ticket={ticket}") == 4401  # used

    replay = _ticket(server, ADMIN_TOKEN)
    with connect(f"{url}/replay?speed=max&ticket={replay}", open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] in ("replay_status", "stream_start")
    assert _ws_close_code(f"{url}/replay?ticket={replay}") == 4401

    # Bob's ticket is Bob's: Alice's session is not found for him.
    assert _ws_close_code(f"{url}?ticket={_ticket(server, USER_TOKEN)}") == 4004
    # A token in the URL is refused on the socket too; the header works (scripts).
    assert _ws_close_code(f"{url}?token={ADMIN_TOKEN}") == 4401
    with connect(url, additional_headers={"authorization": f"Bearer {ADMIN_TOKEN}"}) as ws:
        assert _pong(ws)


def test_an_expired_or_forged_ticket_is_refused(server: NaviServerProcess) -> None:
    from navi.server.auth import WsTickets

    url = f"{server.ws_url}/ws/sessions/{server.canary_session}"
    users = Users([User(id="alice", role="admin", token=ADMIN_TOKEN)], open_access=False)
    past = WsTickets(users, secret=TICKET_SECRET, clock=lambda: time.time() - 31)
    assert _ws_close_code(f"{url}?ticket={past.issue(users.users[0])}") == 4401
    # The same ticket, fresh: the server's secret signs it, so it is accepted.
    fresh = WsTickets(users, secret=TICKET_SECRET)
    with connect(f"{url}?ticket={fresh.issue(users.users[0])}", open_timeout=10) as ws:
        assert _pong(ws)
    forged = WsTickets(users, secret="not-the-servers-secret")
    assert _ws_close_code(f"{url}?ticket={forged.issue(users.users[0])}") == 4401
    assert _ws_close_code(f"{url}?ticket=garbage.garbage") == 4401


def test_a_users_file_may_hold_token_hashes(server: NaviServerProcess) -> None:
    with server.client(token=HASHED_TOKEN) as carol:
        assert carol.get("/sessions").json() == []
    digest = USERS[2]["token_sha256"]
    with server.client(token=digest) as thief:  # the hash itself is no token
        assert thief.get("/sessions").status_code == 401


def test_navi_users_add_prints_a_token_that_works(own_server: NaviServerProcess) -> None:
    server = own_server
    users_file = server.root / "data" / "users.json"
    done = subprocess.run(
        [sys.executable, "-m", "navi.cli", "users", "add", "dave", "--role", "user"],
        cwd=server.root / "cwd",
        env={**server.env, "NAVI_USERS_FILE": str(users_file)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    token = done.stdout.strip()
    assert len(token) >= 32 and "\n" not in token
    stored = json.loads(users_file.read_text())
    assert token not in users_file.read_text()
    assert stored[-1] == {
        "id": "dave",
        "role": "user",
        "token_sha256": hashlib.sha256(token.encode()).hexdigest(),
    }
    assert os.stat(users_file).st_mode & 0o077 == 0
    # The running server notices the new user without a restart.
    deadline = time.monotonic() + 10
    with server.client(token=token) as dave:
        while (status := dave.get("/sessions").status_code) != 200:
            assert status == 401 and time.monotonic() < deadline
            time.sleep(0.2)
        sid = dave.post("/sessions", json={}).json()["session_id"]
        assert [s["session_id"] for s in dave.get("/sessions").json()] == [sid]


def test_a_role_user_cannot_make_the_agent_run_code(own_server: NaviServerProcess) -> None:
    server = own_server
    code = (
        "import os, pathlib\npathlib.Path(os.environ['NAVI_FILES_DIR'], 'ran.txt').write_text('x')"
    )
    call = FakeToolCall(name="code_exec", arguments={"code": code})

    def turn(token: str) -> tuple[str, list[dict[str, Any]]]:
        sid = server.create_session("secretary", token=token)  # secretary enables code_exec
        server.llm.script(Reply(tool_calls=[call]), Reply(text="done"))
        before = len(server.llm.requests)
        assert server.send(sid, "run this code", token=token).status_code == 200
        return sid, server.llm.requests[before:]

    # Bob (role user) cannot: refused where the tool runs, and never offered.
    bob_session, asked = turn(USER_TOKEN)
    [tool] = server.tool_messages(bob_session, token=USER_TOKEN)
    assert tool["success"] is False  # a failed tool card
    assert "user bob may not use tool code_exec" in tool["content"]
    assert not (server.root / "files" / bob_session / "ran.txt").exists()
    offered = {t["function"]["name"] for t in asked[0]["tools"]}
    assert "code_exec" not in offered and "web_search" in offered
    with server.client(token=USER_TOKEN) as bob:
        names = {t["name"] for t in bob.get("/agents/tools").json()}
        assert "code_exec" not in names and "terminal" not in names and "web_search" in names

    # Alice (admin) can: the same call runs and leaves its mark, so the check above
    # would have seen it.
    alice_session, _ = turn(ADMIN_TOKEN)
    assert (server.root / "files" / alice_session / "ran.txt").exists()

    # After a restart the run still knows whose session it is.
    server.restart()
    server.llm.script(Reply(tool_calls=[call]), Reply(text="done"))
    assert server.send(bob_session, "again", token=USER_TOKEN).status_code == 200
    tools = server.tool_messages(bob_session, token=USER_TOKEN)
    assert len(tools) == 2 and "user bob may not use tool code_exec" in tools[-1]["content"]
    assert not (server.root / "files" / bob_session / "ran.txt").exists()


def test_the_users_file_grants_tools_to_a_role_user(start_navi: StartNavi) -> None:
    server = start_navi(
        users=[
            {"id": "alice", "token": ADMIN_TOKEN, "role": "admin"},
            {"id": "erin", "token": USER_TOKEN, "role": "user", "tools": ["code_exec", "todo"]},
        ],
        env={"NAVI_UNSANDBOXED_TOOLS": "1"},
        canary_row=False,
    )
    with server.client(token=USER_TOKEN) as erin:
        names = [t["name"] for t in erin.get("/agents/tools").json()]
        assert sorted(names) == ["code_exec", "todo"]
    sid = server.create_session("secretary", token=USER_TOKEN)
    code = (
        "import os, pathlib\npathlib.Path(os.environ['NAVI_FILES_DIR'], 'ran.txt').write_text('x')"
    )
    server.llm.script(
        Reply(tool_calls=[FakeToolCall(name="web_search", arguments={"query": "x"})]),
        Reply(tool_calls=[FakeToolCall(name="code_exec", arguments={"code": code})]),
        Reply(text="done"),
    )
    before = len(server.llm.requests)
    assert server.send(sid, "go", token=USER_TOKEN).status_code == 200
    offered = {t["function"]["name"] for t in server.llm.requests[before]["tools"]}
    assert offered == {"code_exec", "todo"}
    searched, ran = server.tool_messages(sid, token=USER_TOKEN)
    assert "user erin may not use tool web_search" in searched["content"]
    assert (server.root / "files" / sid / "ran.txt").exists(), ran


def test_open_access_needs_no_token_and_no_ticket(navi_process: NaviServerProcess) -> None:
    # Kept as it was: bound to loopback with no token, the local user is everyone.
    sid = navi_process.canary_session
    with connect(f"{navi_process.ws_url}/ws/sessions/{sid}", open_timeout=10) as ws:
        assert _pong(ws)
    with httpx.Client(base_url=navi_process.url) as http:
        assert http.get("/sessions").status_code == 200
        assert http.post("/auth/ws-ticket").status_code == 200  # what the web client asks
