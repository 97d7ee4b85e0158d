"""``/v1`` (Navi as an OpenAI-compatible model) as another user or a careless client meets
it on a real ``navi serve``: a conversation is continued only in the caller's own
session, a run offers only the tools the caller may use, bodies are bounded, and Navi
fetches no remote image for a client.

Each test failed before ``/v1`` existed (navi/server/openai/api.py): every request
there was a 404 (``GET``) or 405 (``POST``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.security.conftest import NaviServerProcess, StartNavi, fresh
from tests.support.fake_llm_script import FakeToolCall, Reply

ADMIN = "v1-security-admin-6e1d0b93"
ALICE = "v1-security-alice-2fa94c7e"
BOB = "v1-security-bob-81d3e5a0c"
USERS = [
    {"id": "admin", "token": ADMIN, "role": "admin"},
    # server_admin's reach (the sandbox's network) is granted; its tools are the role's.
    {"id": "alice", "token": ALICE, "role": "user", "grants": ["tool_network"]},
    {"id": "bob", "token": BOB, "role": "user", "tools": ["todo", "scratchpad"]},
]


_clients: list[openai.OpenAI] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _clients:
        _clients.pop().close()


@pytest.fixture(scope="module")
def _users_server(start_module_navi: StartNavi) -> NaviServerProcess:
    return start_module_navi(users=USERS, canary_row=False)


@pytest.fixture
def users_server(_users_server: NaviServerProcess) -> NaviServerProcess:
    """Admin, Alice and Bob (each with a token): one server for this module's tests."""
    return fresh(_users_server)


def client(server: NaviServerProcess, token: str) -> openai.OpenAI:
    api = openai.OpenAI(base_url=server.url + "/v1", api_key=token, max_retries=0, timeout=60)
    _clients.append(api)
    return api


def offered(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or ()}


def sessions_of(server: NaviServerProcess, token: str) -> list[dict[str, Any]]:
    with server.client(token=token) as http:
        found: list[dict[str, Any]] = http.get("/sessions").json()
        return found


def test_another_users_session_is_never_continued(users_server: NaviServerProcess) -> None:
    server = users_server
    bobs_before = {s["session_id"] for s in sessions_of(server, BOB)}
    server.llm.script(Reply(text="Your code word is kept."), Reply(text="Bob's own answer."))
    first = [{"role": "user", "content": "My code word is heron."}]
    raw = client(server, ALICE).chat.completions.with_raw_response.create(
        model="navi/secretary", messages=first
    )
    alices = raw.headers["x-navi-session"]
    before = server.session(alices, token=ALICE)["messages"]
    # Bob sends the very conversation Alice holds, extended: a new session of his own.
    extended = [
        *first,
        {"role": "assistant", "content": "Your code word is kept."},
        {"role": "user", "content": "What is my code word?"},
    ]
    raw = client(server, BOB).chat.completions.with_raw_response.create(
        model="navi/secretary", messages=extended
    )
    bobs = raw.headers["x-navi-session"]
    assert bobs != alices
    assert server.session(alices, token=ALICE)["messages"] == before
    # Bob's list gained his new session and nothing else.
    bobs_now = [s["session_id"] for s in sessions_of(server, BOB)]
    assert [sid for sid in bobs_now if sid not in bobs_before] == [bobs]
    assert alices not in {s["session_id"] for s in sessions_of(server, BOB)}
    with server.client(token=BOB) as http:
        assert http.get(f"/sessions/{alices}").status_code == 404
    # Alice's own next request still continues hers.
    server.llm.script(Reply(text="Heron."))
    raw = client(server, ALICE).chat.completions.with_raw_response.create(
        model="navi/secretary", messages=extended
    )
    assert raw.headers["x-navi-session"] == alices


def test_a_run_offers_and_runs_only_the_tools_the_caller_may_use(
    users_server: NaviServerProcess,
) -> None:
    server = users_server
    # Bob may use todo and scratchpad only; the model names code_exec all the same.
    call = FakeToolCall(name="code_exec", arguments={"code": "print('code-ran-5d2a')"})
    server.llm.script(Reply(tool_calls=[call]), Reply(text="done"))
    raw = client(server, BOB).chat.completions.with_raw_response.create(
        model="navi/secretary", messages=[{"role": "user", "content": "run some code"}]
    )
    asked = server.llm.requests
    assert offered(asked[0]) == {"todo", "scratchpad"}
    [tool] = server.tool_messages(raw.headers["x-navi-session"], token=BOB)
    assert tool["success"] is False and "code-ran-5d2a" not in tool["content"]
    assert "may not use tool code_exec" in tool["content"]
    # Alice (role user, no tools list): everything but the tools that act on the machine,
    # in server_admin too (her grant opens its reach, not its tools).
    server.llm.script(Reply(text="ok"))
    client(server, ALICE).chat.completions.create(
        model="navi/server_admin", messages=[{"role": "user", "content": "hello"}]
    )
    alice_offered = offered(server.llm.requests[-1])
    assert alice_offered and not {"terminal", "ssh_exec", "code_exec", "write_tool"} & alice_offered
    # The admin gets them.
    server.llm.script(Reply(text="ok"))
    client(server, ADMIN).chat.completions.create(
        model="navi/server_admin", messages=[{"role": "user", "content": "hello"}]
    )
    assert {"terminal", "code_exec"} <= offered(server.llm.requests[-1])


def _too_much() -> Iterator[bytes]:
    yield b'{"model": "navi/secretary", "messages": [{"role": "user", "content": "'
    chunk = b"a" * (1024 * 1024)
    for _ in range(100):
        yield chunk


def test_a_body_over_the_limit_is_a_413_before_it_is_read(
    shared_navi: NaviServerProcess,
) -> None:
    server = shared_navi
    calls = len(server.llm.requests)
    sessions = len(sessions_of(server, ""))
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for declared in (True, False):  # with its Content-Length, and chunked
            headers = {"content-type": "application/json"}
            if declared:
                headers["content-length"] = str(100 * 1024 * 1024 + 70)
            started = time.monotonic()
            response = http.post("/v1/chat/completions", content=_too_much(), headers=headers)
            assert response.status_code == 413, response.text
            error = response.json()["error"]
            assert error["code"] == "request_too_large" and "limit" in error["message"]
            assert time.monotonic() - started < 10
        assert http.get("/health").status_code == 200
    assert len(server.llm.requests) == calls
    assert len(sessions_of(server, "")) == sessions  # no session was created


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/secret.png",
        "https://example.com/cat.png",
        "file:///etc/passwd",
        "//169.254.169.254/latest/meta-data",
    ],
)
def test_a_remote_image_url_is_refused_and_never_fetched(
    shared_navi: NaviServerProcess, url: str
) -> None:
    server = shared_navi
    calls = len(server.llm.requests)
    sessions = len(sessions_of(server, ""))
    with pytest.raises(openai.BadRequestError) as caught:
        client(server, "no-token").chat.completions.create(
            model="navi/secretary",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                }
            ],
        )
    assert caught.value.status_code == 400
    assert caught.value.code == "invalid_image_url"
    assert "does not fetch remote images" in caught.value.message
    assert len(server.llm.requests) == calls
    assert len(sessions_of(server, "")) == sessions  # nothing was created


def test_another_users_idempotency_key_never_reaches_my_run(
    users_server: NaviServerProcess,
) -> None:
    server = users_server
    server.llm.script(Reply(text="Alice's secret answer."), Reply(text="Bob's own answer."))
    body = {"model": "navi/secretary", "messages": [{"role": "user", "content": "Hello"}]}
    key = {"idempotency-key": "shared-key-1"}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        alice = http.post(
            "/v1/chat/completions", json=body, headers={**key, "authorization": f"Bearer {ALICE}"}
        )
        bob = http.post(
            "/v1/chat/completions", json=body, headers={**key, "authorization": f"Bearer {BOB}"}
        )
    assert alice.status_code == bob.status_code == 200
    assert bob.json()["choices"][0]["message"]["content"] == "Bob's own answer."
    assert bob.headers["x-navi-session"] != alice.headers["x-navi-session"]
    assert "idempotent-replayed" not in bob.headers
    # An over-long key is refused before anything runs.
    with httpx.Client(base_url=server.url, timeout=30) as http:
        long_key = http.post(
            "/v1/chat/completions",
            json=body,
            headers={"idempotency-key": "k" * 300, "authorization": f"Bearer {BOB}"},
        )
    assert long_key.status_code == 400


def test_cors_answers_only_listed_origins_and_only_on_v1(start_navi: StartNavi) -> None:
    listed = "http://127.0.0.1:9"
    server = start_navi(env={"NAVI_ALLOWED_ORIGINS": listed}, canary_row=False)
    preflight = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
    }
    with httpx.Client(base_url=server.url, timeout=30) as http:
        ok = http.options("/v1/chat/completions", headers={"origin": listed, **preflight})
        assert ok.status_code == 200
        assert ok.headers["access-control-allow-origin"] == listed
        assert "access-control-allow-credentials" not in ok.headers
        evil = "http://evil.example"
        refused = http.options("/v1/chat/completions", headers={"origin": evil, **preflight})
        assert "access-control-allow-origin" not in refused.headers
        # The Origin check still stands: an unlisted page's POST is refused.
        body = {"model": "navi/secretary", "messages": [{"role": "user", "content": "hi"}]}
        post = http.post("/v1/chat/completions", json=body, headers={"origin": evil})
        assert post.status_code == 403 and "access-control-allow-origin" not in post.headers
        # Outside /v1 a listed origin gets no CORS either.
        sessions = http.get("/sessions", headers={"origin": listed})
        assert "access-control-allow-origin" not in sessions.headers
    assert server.llm.requests == []


@pytest.mark.postgres
def test_on_postgresql_another_users_key_on_another_node_never_reaches_my_run(
    start_navi: StartNavi, postgres_url: str
) -> None:
    """The shared ledger (navi/server/openai/ledger_pg.py): Bob sends Alice's key and
    body to the other node; he gets a run of his own, not hers (the key then refuses
    another body of his only). Alice's own retry there follows her run."""
    cluster = {"NAVI_DATABASE_URL": postgres_url, "NAVI_WS_TICKET_SECRET": "v1-ledger-secret"}
    a = start_navi(users=USERS, env=cluster, canary_row=False)
    b = start_navi(users=USERS, env=cluster, canary_row=False)
    a.llm.script(Reply(text="Alice's secret answer."))
    b.llm.script(Reply(text="Bob's own answer."))
    body = {"model": "navi/secretary", "messages": [{"role": "user", "content": "Hello"}]}
    key = f"shared-key-{time.time_ns()}"

    def post(server: NaviServerProcess, token: str, payload: dict[str, Any]) -> httpx.Response:
        headers = {"idempotency-key": key, "authorization": f"Bearer {token}"}
        with httpx.Client(base_url=server.url, timeout=30) as http:
            return http.post("/v1/chat/completions", json=payload, headers=headers)

    alice = post(a, ALICE, body)
    bob = post(b, BOB, body)
    assert alice.status_code == bob.status_code == 200
    assert bob.json()["choices"][0]["message"]["content"] == "Bob's own answer."
    assert bob.headers["x-navi-session"] != alice.headers["x-navi-session"]
    assert "idempotent-replayed" not in bob.headers
    other = {**body, "messages": [{"role": "user", "content": "Something else"}]}
    bob_other = post(b, BOB, other)
    assert bob_other.status_code == 400  # his own key reused: his own refusal
    assert bob_other.json()["error"]["code"] == "idempotency_key_reused"
    again = post(b, ALICE, body)
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json()["choices"][0]["message"]["content"] == "Alice's secret answer."
    assert again.headers["x-navi-session"] == alice.headers["x-navi-session"]
