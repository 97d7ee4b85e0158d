"""``GET /sessions?q=`` searches every message of the caller's own chats: never another
user's, wildcards are plain text, and an oversized query is refused without harm."""

from __future__ import annotations

import http.client

import pytest

from tests.security.conftest import NaviServerProcess, StartNavi, fresh

ALICE = "alice-token-" + "a" * 20
BOB = "bob-token-" + "b" * 20
USERS = [
    {"id": "alice", "token": ALICE, "role": "admin"},
    {"id": "bob", "token": BOB, "role": "user"},
]


@pytest.fixture(scope="module")
def _server(start_module_navi: StartNavi) -> NaviServerProcess:
    return start_module_navi(users=USERS, token=ALICE)


@pytest.fixture
def server(_server: NaviServerProcess) -> NaviServerProcess:
    """Alice (admin, the server's own client) and Bob: one server for the module."""
    return fresh(_server)


def test_search_finds_only_ones_own_words_and_takes_wildcards_literally(
    server: NaviServerProcess,
) -> None:
    server.llm.script()
    session = server.create_session(token=ALICE)
    assert server.send(session, "my locker code is 4711", token=ALICE).status_code == 200
    with server.client(token=ALICE) as alice, server.client(token=BOB) as bob:
        assert [s["session_id"] for s in alice.get("/sessions", params={"q": "4711"}).json()] == [
            session
        ]
        for query in ("4711", "locker", "%", "_", ".*", "*", "' OR 1=1 --"):
            response = bob.get("/sessions", params={"q": query})
            assert response.status_code == 200, response.text
            assert response.json() == [], query
        for query in ("%", "_", ".*", "' OR 1=1 --"):
            assert alice.get("/sessions", params={"q": query}).json() == [], query


def test_an_oversized_query_is_refused_and_the_server_stays_up(server: NaviServerProcess) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request(
            "GET", "/sessions?q=" + "x" * 1_000_000, headers={"Authorization": f"Bearer {ALICE}"}
        )
        status = connection.getresponse().status
    except (OSError, http.client.HTTPException):
        status = 0  # the server may close the connection instead of answering
    finally:
        connection.close()
    assert status != 200
    with server.client(token=ALICE) as alice:
        assert alice.get("/sessions").status_code == 200
