"""Approvals as an attacker meets them, on a real ``navi serve`` with the tools' own
defaults (no NAVI_TOOL_APPROVAL): a page the LLM read tells it to run code, and the
code does not run until the user says so; nobody but the session's owner (or an admin)
can see or decide the request; bad decisions get clear errors and lose nothing."""

from __future__ import annotations

import json
import signal
import time

import httpx
import pytest
from websockets.sync.client import connect

from tests.security.conftest import NaviServerProcess, StartNavi, fresh, ws_frames
from tests.support.fake_llm_script import FakeToolCall, Reply

ALICE = {"id": "alice", "token": "alice-token-5e1d-4c2a9b", "role": "user", "tools": ["code_exec"]}
BOB = {"id": "bob", "token": "bob-token-77c0-91de3f", "role": "user", "tools": ["code_exec"]}
ADMIN = {"id": "root", "token": "root-token-a9f3-0b7e61", "role": "admin"}
ASK = {"NAVI_TOOL_APPROVAL": "", "NAVI_UNSANDBOXED_TOOLS": "1"}
READ_TODO = FakeToolCall(name="todo", arguments={"action": "read"})


@pytest.fixture(scope="module")
def _asking_server(start_module_navi: StartNavi) -> NaviServerProcess:
    return start_module_navi(env=ASK)


@pytest.fixture
def asking_server(_asking_server: NaviServerProcess) -> NaviServerProcess:
    """A server with the tools' own approval defaults, shared by the tests that decide
    only their own sessions' calls (and never restart it)."""
    return fresh(_asking_server)


def _marker_code(path: str) -> FakeToolCall:
    code = f"open({path!r}, 'w').write('ran')\nprint('done')"
    return FakeToolCall(name="code_exec", arguments={"code": code})


def test_code_a_hostile_page_asked_for_waits_and_never_runs_when_denied(
    asking_server: NaviServerProcess,
) -> None:
    server = asking_server
    sid = server.create_session("secretary")
    marker = server.root / "outside" / f"hostile-code-ran-{sid}"
    server.llm.script(
        Reply(tool_calls=[_marker_code(str(marker))]), Reply(text="I did not run it.")
    )
    turn = server.send_in_background(sid, "summarise that page")
    [request] = server.pending(sid)
    assert request["type"] == "approval_required" and request["tool"] == "code_exec"
    assert request["policy"] == "code_exec's default"
    # (No wait: the call is denied below, so a marker found after the turn's end would
    # say that it ran without a decision.)
    assert not marker.exists(), "the code ran without a decision"
    with server.client() as http:
        decided = http.post(
            f"/sessions/{sid}/approvals/{request['call_id']}",
            json={"decision": "deny", "reason": "that page is not mine"},
        )
        assert decided.status_code == 200, decided.text
        # Decided once: a second decision is refused, the run is not touched.
        again = http.post(
            f"/sessions/{sid}/approvals/{request['call_id']}", json={"decision": "approve"}
        )
        assert again.status_code == 409, again.text
    turn.join(30)
    assert not marker.exists()
    [tool] = server.tool_messages(sid)
    assert tool["success"] is False
    assert "The user declined this call: that page is not mine" in tool["content"]


def test_only_the_owner_or_an_admin_sees_and_decides(start_navi: StartNavi) -> None:
    server = start_navi(users=[ALICE, BOB, ADMIN], env=ASK, canary_row=False)
    marker = server.root / "outside" / "alice-code-ran"
    sid = server.create_session("secretary", token=ALICE["token"])
    server.llm.script(Reply(tool_calls=[_marker_code(str(marker))]), Reply(text="ok"))
    turn = server.send_in_background(sid, "summarise that page", token=ALICE["token"])
    [request] = server.pending(sid, token=ALICE["token"])
    call = request["call_id"]
    with server.client(token=BOB["token"]) as bob:
        assert bob.get(f"/sessions/{sid}/approvals").status_code == 404
        refused = bob.post(f"/sessions/{sid}/approvals/{call}", json={"decision": "approve"})
        assert refused.status_code == 404, refused.text
        # Bob's own session does not reach Alice's call either.
        own = server.create_session("secretary", token=BOB["token"])
        other = bob.post(f"/sessions/{own}/approvals/{call}", json={"decision": "approve"})
        assert other.status_code == 404, other.text
    with server.client(token="") as anonymous:
        assert anonymous.get(f"/sessions/{sid}/approvals").status_code == 401
    assert not marker.exists()
    # Still waiting for Alice; an admin may decide.
    assert server.pending(sid, token=ALICE["token"])[0]["call_id"] == call
    with server.client(token=ADMIN["token"]) as admin:
        approved = admin.post(f"/sessions/{sid}/approvals/{call}", json={"decision": "approve"})
        assert approved.status_code == 200, approved.text
        assert approved.json()["by"] == "root"
    turn.join(30)
    assert marker.read_text() == "ran"
    # The log orders what happened: the call started only once the admin had decided.
    with server.client(token=ALICE["token"]) as alice:
        log = alice.get(f"/sessions/{sid}/events")
    assert log.status_code == 200, log.text
    types = [json.loads(line)["type"] for line in log.text.splitlines() if line]
    assert types.index("tool.approval_decided") < types.index("tool.started"), types


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        (b'{"decision": "maybe"}', {"content-type": "application/json"}, 422),
        (b'{"decision": "approve", "scope": "forever"}', {"content-type": "application/json"}, 422),
        (b'{"decision": "approve", "extra": 1}', {"content-type": "application/json"}, 422),
        (b"not json", {"content-type": "application/json"}, 400),
        (b'{"decision": "approve"}', {"content-type": "text/plain"}, 415),
        (
            b'{"decision": "approve"}',
            {"content-type": "application/json", "origin": "https://evil.example"},
            403,
        ),
        (
            json.dumps({"decision": "deny", "reason": "x" * 2_000_000}).encode(),
            {"content-type": "application/json"},
            413,
        ),
    ],
    ids=[
        "bad-decision",
        "bad-scope",
        "unknown-field",
        "not-json",
        "text-plain",
        "foreign-origin",
        "oversized",
    ],
)
def test_bad_decisions_get_clear_errors_and_the_wait_goes_on(
    asking_server: NaviServerProcess, body: bytes, headers: dict[str, str], status: int
) -> None:
    server = asking_server
    sid = server.create_session("secretary")
    marker = server.root / "outside" / f"bad-decision-ran-{sid}"
    server.llm.script(Reply(tool_calls=[_marker_code(str(marker))]), Reply(text="ok"))
    turn = server.send_in_background(sid, "summarise that page")
    [request] = server.pending(sid)
    url = f"{server.url}/sessions/{sid}/approvals/{request['call_id']}"
    response = httpx.post(url, content=body, headers=headers, timeout=30)
    assert response.status_code == status, response.text
    assert "Traceback" not in response.text
    with server.client() as http:
        unknown = http.post(f"/sessions/{sid}/approvals/no-such-call", json={"decision": "approve"})
        assert unknown.status_code == 404 and "no-such-call" in unknown.text
    # Nothing was decided: the call still waits, and a proper decision still works.
    assert server.pending(sid)[0]["call_id"] == request["call_id"]
    assert not marker.exists()
    with server.client() as http:
        ok = http.post(f"/sessions/{sid}/approvals/{request['call_id']}", json={"decision": "deny"})
        assert ok.status_code == 200, ok.text
    turn.join(30)
    assert not marker.exists()


def test_a_sigkill_while_waiting_neither_runs_nor_asks_twice(start_navi: StartNavi) -> None:
    server = start_navi(env=ASK, canary_row=False)
    effects = server.root / "outside" / "effects.log"
    code = f"open({str(effects)!r}, 'a').write('ran\\n')\nprint('done')"
    sid = server.create_session("secretary")
    server.llm.script(
        Reply(tool_calls=[FakeToolCall(name="code_exec", arguments={"code": code})]),
        Reply(text="Ran it once."),
    )
    turn = server.send_in_background(sid, "summarise that page")
    [request] = server.pending(sid)
    server.stop(signal.SIGKILL)
    turn.join(30)
    server.start()
    # Still waiting, the same request, asked once; nothing ran.
    [again] = server.pending(sid)
    assert again["call_id"] == request["call_id"] and again["seq"] == request["seq"]
    assert not effects.exists()
    with server.client() as http:
        decided = http.post(
            f"/sessions/{sid}/approvals/{request['call_id']}", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            events = http.get(f"/sessions/{sid}/events").text
            if '"run.completed"' in events:
                break
            time.sleep(0.1)
    types = [json.loads(line)["type"] for line in events.splitlines()]
    assert types.count("tool.approval_requested") == 1
    assert types.count("tool.approval_decided") == 1
    assert effects.read_text() == "ran\n"


def test_bad_decisions_over_the_socket_decide_nothing(asking_server: NaviServerProcess) -> None:
    """approve / deny frames with a missing, mistyped, foreign, path-like or huge call id
    or a bad scope: each gets an error frame, the socket answers, both calls still wait;
    a socket of one session cannot decide another session's call."""
    server = asking_server
    mine, theirs = server.create_session("secretary"), server.create_session("secretary")
    marker = {sid: server.root / "outside" / f"ws-decision-ran-{sid}" for sid in (mine, theirs)}
    server.llm.script(
        # Call ids are unique within a session only: the first session's call is its
        # answer's second, so that the two ids differ.
        Reply(tool_calls=[READ_TODO, _marker_code(str(marker[mine]))]),
        Reply(tool_calls=[_marker_code(str(marker[theirs]))]),
        Reply(text="ok"),
        Reply(text="ok"),
    )
    turns = [server.send_in_background(mine, "summarise that page")]
    [mine_call] = [p["call_id"] for p in server.pending(mine)]
    turns.append(server.send_in_background(theirs, "summarise that page"))
    [their_call] = [p["call_id"] for p in server.pending(theirs)]
    assert mine_call != their_call
    bad = [
        {"type": "approve"},
        {"type": "approve", "call_id": 7},
        {"type": "approve", "call_id": [mine_call]},
        {"type": "approve", "call_id": their_call},  # the other session's call
        {"type": "approve", "call_id": f"../{theirs}/{their_call}"},
        {"type": "approve", "call_id": mine_call, "scope": "forever"},
        {"type": "deny", "call_id": "x" * 200_000},
    ]
    with connect(f"{server.ws_url}/ws/sessions/{mine}", origin=None) as ws:  # type: ignore[arg-type]
        ws_frames(ws)
        for frame in bad:
            ws.send(json.dumps(frame))
            answers = ws_frames(ws)
            assert [a["type"] for a in answers] == ["error"], (frame, answers)
            assert "Traceback" not in answers[0]["message"]
        for sid, call in ((mine, mine_call), (theirs, their_call)):
            assert [p["call_id"] for p in server.pending(sid)] == [call]
        # A proper decision on this socket still works; the other call waits on.
        ws.send(json.dumps({"type": "deny", "call_id": mine_call, "reason": "no"}))
        decided = [a for a in ws_frames(ws) if a["type"] == "approval_decided"]
        assert decided and decided[0]["call_id"] == mine_call and not decided[0]["approved"]
    assert server.pending(theirs)[0]["call_id"] == their_call
    with server.client() as http:
        answer = http.post(f"/sessions/{theirs}/approvals/{their_call}", json={"decision": "deny"})
        assert answer.status_code == 200, answer.text
    for turn in turns:
        turn.join(30)
    assert not marker[mine].exists() and not marker[theirs].exists()


def _deny_the_one_request(server: NaviServerProcess, sid: str, tool: str) -> None:
    [request] = server.pending(sid)
    assert request["tool"] == tool and request["policy"] == f"{tool}'s default", request
    with server.client() as http:
        denied = http.post(
            f"/sessions/{sid}/approvals/{request['call_id']}", json={"decision": "deny"}
        )
        assert denied.status_code == 200, denied.text


def test_the_llm_does_not_widen_its_own_reach_by_entering_a_profile(
    asking_server: NaviServerProcess,
) -> None:
    # A page tells the LLM to move into server_admin, whose sandboxed code has the
    # network (and so Navi's own API on 127.0.0.1): the switch waits for the person.
    server = asking_server
    sid = server.create_session("secretary")
    into_admin = FakeToolCall(name="switch_profile", arguments={"profile_id": "server_admin"})
    server.llm.script(Reply(tool_calls=[into_admin]), Reply(text="I stayed."))
    turn = server.send_in_background(sid, "summarise that page")
    _deny_the_one_request(server, sid, "switch_profile")
    turn.join(30)
    assert server.session(sid)["profile_id"] == "secretary"
    [tool] = server.tool_messages(sid)
    assert tool["success"] is False and "declined" in tool["content"]

    # A subagent under server_admin waits for the person too.
    spawn = FakeToolCall(
        name="spawn_agent", arguments={"task": "check the disks", "profile_id": "server_admin"}
    )
    server.llm.script(Reply(tool_calls=[spawn]), Reply(text="No subagent then."))
    turn = server.send_in_background(sid, "summarise that page")
    _deny_the_one_request(server, sid, "spawn_agent")
    turn.join(30)

    # Entering a profile that widens nothing runs at once.
    stay = FakeToolCall(name="switch_profile", arguments={"profile_id": "secretary"})
    server.llm.script(Reply(tool_calls=[stay]), Reply(text="Still here."))
    assert server.send(sid, "stay where you are").status_code == 200
    assert server.tool_messages(sid)[-1]["success"] is True
    with server.client() as http:
        assert http.get(f"/sessions/{sid}/approvals").json()["approvals"] == []
