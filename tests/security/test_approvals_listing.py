"""Approvals and accounts: the session list's ``pending_approvals`` (which the web client
shows as a mark on a chat) and the approval routes tell each user about their own
sessions only; another user can neither see that a call waits nor decide it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from navi.accounts import User, Users
from tests.support.fake_llm import FakeLLMServer, FakeToolCall, Reply
from tests.support.navi_server import RunningServer, run_server

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"
WRITE = FakeToolCall(
    name="filesystem", arguments={"action": "write", "path": "secret-plan.txt", "content": "x"}
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    users = Users(
        [User(id="alice", token=ALICE), User(id="bob", token=BOB)],
        open_access=False,
    )
    # tool_approval "": each tool's default, so the write asks (the rig's "auto" off).
    with (
        FakeLLMServer.in_thread() as fake,
        run_server(tmp_path, fake, users=users, tool_approval="") as running,
    ):
        yield running


def _client(server: RunningServer, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, headers={"authorization": f"Bearer {token}"}, timeout=30
    )


def _ws_url(server: RunningServer, token: str, session_id: str) -> str:
    ticket = httpx.post(
        f"{server.url}/auth/ws-ticket", headers={"authorization": f"Bearer {token}"}
    ).json()["ticket"]
    return f"{server.ws_url}/ws/sessions/{session_id}?ticket={ticket}"


def _waiting(http: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        approvals: list[dict[str, Any]] = http.get(f"/sessions/{session_id}/approvals").json()[
            "approvals"
        ]
        if approvals:
            return approvals
        time.sleep(0.05)
    raise AssertionError("the call never waited for approval")


def test_another_user_neither_sees_nor_decides_a_pending_approval(
    server: RunningServer, tmp_path: Path
) -> None:
    server.fake_llm.script(Reply(tool_calls=[WRITE]), Reply(text="Done."))
    with _client(server, ALICE) as alice, _client(server, BOB) as bob:
        mine = alice.post("/sessions", json={}).json()["session_id"]
        bobs = bob.post("/sessions", json={}).json()["session_id"]
        with connect(_ws_url(server, ALICE, mine)) as ws:
            ws.send(json.dumps({"type": "message", "content": "write the secret plan"}))
            (request,) = _waiting(alice, mine)
            call_id = request["call_id"]

            listed = {s["session_id"]: s for s in alice.get("/sessions").json()}
            assert listed[mine]["pending_approvals"] == 1

            # Bob's list (and his search) holds his own chat only, with nothing waiting.
            for path in ("/sessions", "/sessions?q=secret"):
                his = bob.get(path).json()
                assert all(s["session_id"] != mine for s in his), path
                assert all(s["pending_approvals"] == 0 for s in his), path
            assert [s["session_id"] for s in bob.get("/sessions").json()] == [bobs]
            # Nor can he list, decide, or follow Alice's waiting call.
            assert bob.get(f"/sessions/{mine}/approvals").status_code == 404
            for decision in ({"decision": "approve"}, {"decision": "deny", "reason": "no"}):
                answer = bob.post(f"/sessions/{mine}/approvals/{call_id}", json=decision)
                assert answer.status_code == 404, answer.text
            # Deciding on his own session by her call id finds nothing either.
            answer = bob.post(f"/sessions/{bobs}/approvals/{call_id}", json={"decision": "approve"})
            assert answer.status_code == 404, answer.text
            assert alice.get(f"/sessions/{mine}/approvals").json()["approvals"] == [request]
            assert not (tmp_path / "files" / mine / "secret-plan.txt").exists()

            answer = alice.post(
                f"/sessions/{mine}/approvals/{call_id}", json={"decision": "deny", "reason": "no"}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["by"] == "alice"
        deadline = time.monotonic() + 20
        while alice.get(f"/sessions/{mine}").json()["run_active"]:
            assert time.monotonic() < deadline, "the run did not end"
            time.sleep(0.05)
        listed = {s["session_id"]: s for s in alice.get("/sessions").json()}
        assert listed[mine]["pending_approvals"] == 0
