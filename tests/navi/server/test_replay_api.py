"""Replay and debugging over REST against a real server and the fake LLM: time travel,
LLM requests, forks (that go on differently), export / import, verify, the timeline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.fake_llm import FakeToolCall, Reply
from tests.support.navi_server import RunningServer, navi_server_for

NDJSON = {"content-type": "application/x-ndjson"}


def client(server: RunningServer, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=server.url, headers=headers, timeout=30)


def events_of(http: httpx.Client, sid: str) -> list[dict[str, Any]]:
    response = http.get(f"/sessions/{sid}/events")
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines()]


def seq_of(events: list[dict[str, Any]], type_: str, nth: int = 0) -> int:
    seqs = [e["seq"] for e in events if e["type"] == type_]
    return int(seqs[nth])


def chat(http: httpx.Client, sid: str, text: str) -> str:
    reply = http.post(f"/sessions/{sid}/messages", json={"content": text})
    assert reply.status_code == 200, reply.text
    return str(reply.json()["content"])


def new_session(http: httpx.Client) -> str:
    return str(http.post("/sessions", json={"profile_id": "secretary"}).json()["session_id"])


def two_turns(server: RunningServer, http: httpx.Client) -> str:
    server.fake_llm.script(Reply(text="One."), Reply(text="Two."))
    sid = new_session(http)
    assert chat(http, sid, "first question") == "One."
    assert chat(http, sid, "second question") == "Two."
    return sid


def shown(session: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in session["messages"]]


def test_state_at_any_seq_and_the_llm_requests(navi_server: RunningServer) -> None:
    navi_server.fake_llm.script(
        Reply(
            tool_calls=[
                FakeToolCall(name="todo", arguments={"action": "set", "items": [{"text": "look"}]})
            ]
        ),
        Reply(text="All done."),
    )
    with client(navi_server) as http:
        sid = new_session(http)
        assert chat(http, sid, "make a list") == "All done."
        events = events_of(http, sid)
        head = events[-1]["seq"]

        now = http.get(f"/sessions/{sid}/state").json()
        assert now["seq"] == now["head"] == head and now["run_state"] == "done"
        assert [m["role"] for m in now["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert [t["text"] for t in now["todo"]] == ["look"]
        assert now["active_profile"]["profile_id"] == "secretary"
        assert [r["purpose"] for r in now["llm_requests"]] == ["loop", "loop"]
        second = now["llm_requests"][1]
        assert "todo" in second["tools"]
        # The exact request: what the LLM was sent for its second call (tool result in).
        assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool"]

        requested = seq_of(events, "llm.requested")
        before = http.get(f"/sessions/{sid}/state", params={"at": requested}).json()
        assert before["event_type"] == "llm.requested" and before["run_state"] != "done"
        assert [m["role"] for m in before["context"]] == ["user"]
        assert before["todo"] == []
        start = http.get(f"/sessions/{sid}/state", params={"at": 0}).json()
        assert start["messages"] == [] and start["event_type"] is None

        call = http.get(f"/sessions/{sid}/llm-requests/{requested}").json()
        assert call["seq"] == requested and call["messages"][0]["content"] == "make a list"

        bad_params: list[dict[str, Any]] = [{"at": "x"}, {"at": -1}, {"at": head + 1}]
        for params in bad_params:
            bad = http.get(f"/sessions/{sid}/state", params=params)
            assert bad.status_code == 400 and "error" in bad.json(), params
        not_a_call = http.get(f"/sessions/{sid}/llm-requests/1")
        assert (
            not_a_call.status_code == 400 and "not an llm.requested" in not_a_call.json()["error"]
        )
        assert http.get(f"/sessions/{sid}/llm-requests/{head + 5}").status_code == 400
        assert http.get("/sessions/nope/state").status_code == 404
        assert http.get("/sessions/nope/llm-requests/1").status_code == 404


def test_a_fork_goes_on_differently_and_leaves_its_origin_alone(
    navi_server: RunningServer,
) -> None:
    fake = navi_server.fake_llm
    with client(navi_server) as http:
        origin = two_turns(navi_server, http)
        origin_before = http.get(f"/sessions/{origin}").json()
        origin_events = events_of(http, origin)
        second = seq_of(origin_events, "user.message", 1)

        # "Edit the second message and resend": fork just before it, then send the edit.
        created = http.post(f"/sessions/{origin}/fork", json={"at": second - 1})
        assert created.status_code == 201, created.text
        result = created.json()
        fork = result["session_id"]
        assert result["forked_from"] == origin and result["forked_at_seq"] == second - 1
        assert result["closed_run"] is False and result["head"] == second - 1

        session = http.get(f"/sessions/{fork}").json()
        assert shown(session) == [("user", "first question"), ("assistant", "One.")]
        assert session["last_seq"] == second - 1 and session["run_active"] is False

        fake.script(Reply(text="Edited answer."))
        assert chat(http, fork, "second question, edited") == "Edited answer."
        sent = [(m["role"], m["content"]) for m in fake.requests[-1]["messages"]]
        assert ("user", "first question") in sent and ("assistant", "One.") in sent
        assert ("user", "second question, edited") in sent
        assert all("Two." not in content for _, content in sent)
        assert all(content != "second question" for _, content in sent)

        # The fork's stream is numbered 1..N without gaps: its own session.created,
        # then a copy of its origin's events (same ids) up to the fork point.
        fork_events = events_of(http, fork)
        assert [e["seq"] for e in fork_events] == list(range(1, len(fork_events) + 1))
        assert fork_events[0]["event"]["forked_from"] == origin
        assert [e["event_id"] for e in fork_events[1 : second - 1]] == [
            e["event_id"] for e in origin_events[1 : second - 1]
        ]
        assert shown(http.get(f"/sessions/{fork}").json())[-1] == ("assistant", "Edited answer.")

        # The origin did not change.
        assert http.get(f"/sessions/{origin}").json()["messages"] == origin_before["messages"]
        assert events_of(http, origin) == origin_events

        listed = {s["session_id"]: s for s in http.get("/sessions").json()}
        assert listed[fork]["forked_from"] == origin
        assert listed[fork]["forked_at_seq"] == second - 1
        assert listed[origin]["forked_from"] is None

        # A fork of the fork, in the middle of nothing: it runs too.
        again = http.post(f"/sessions/{fork}/fork", json={"at": second + 1, "title": "again"})
        assert again.status_code == 201, again.text
        grandchild = again.json()["session_id"]
        fake.script(Reply(text="Third way."))
        assert chat(http, grandchild, "and now?") == "Third way."
        assert shown(http.get(f"/sessions/{grandchild}").json())[0] == ("user", "first question")


def test_a_fork_inside_a_run_closes_it(navi_server: RunningServer) -> None:
    navi_server.fake_llm.script(
        Reply(tool_calls=[FakeToolCall(name="todo", arguments={"action": "list"})]),
        Reply(text="Listed."),
    )
    with client(navi_server) as http:
        sid = new_session(http)
        chat(http, sid, "list my tasks")
        requested = seq_of(events_of(http, sid), "tool.requested")
        result = http.post(f"/sessions/{sid}/fork", json={"at": requested}).json()
        assert result["closed_run"] is True
        fork = result["session_id"]
        state = http.get(f"/sessions/{fork}/state").json()
        assert state["run_state"] == "stopped"
        assert [e["type"] for e in events_of(http, fork)][-1] == "run.stopped"
        navi_server.fake_llm.script(Reply(text="Fresh start."))
        assert chat(http, fork, "try again") == "Fresh start."


def test_fork_errors_are_clear(navi_server: RunningServer) -> None:
    with client(navi_server) as http:
        sid = new_session(http)
        for body, status in [
            ({"at": 99}, 400),
            ({"at": 0}, 400),
            ({"at": "one"}, 422),
            ({}, 422),
            ({"at": 1, "surprise": True}, 422),
        ]:
            response = http.post(f"/sessions/{sid}/fork", json=body)
            assert response.status_code == status, (body, response.text)
            assert response.json()["error"]
        assert http.post(f"/sessions/{sid}/fork").status_code == 400  # no body
        assert http.post("/sessions/nope/fork", json={"at": 1}).status_code == 404
        assert len(http.get("/sessions").json()) == 1  # nothing was created


def test_export_then_import_gives_the_same_session(navi_server: RunningServer) -> None:
    with client(navi_server) as http:
        sid = two_turns(navi_server, http)
        exported = http.get(f"/sessions/{sid}/export")
        assert exported.status_code == 200
        assert exported.headers["content-type"].startswith("application/x-ndjson")
        assert "attachment" in exported.headers["content-disposition"]
        lines = exported.content.splitlines()
        header = json.loads(lines[0])
        assert header["navi_export"] == 1 and header["session_id"] == sid
        assert header["events"] == len(lines) - 1
        assert all(json.loads(line)["version"] >= 1 for line in lines[1:])

        same = http.post("/sessions/import", content=exported.content, headers=NDJSON)
        assert same.status_code == 409 and "already exist" in same.json()["error"]

        imported = http.post(
            "/sessions/import?as_new=true", content=exported.content, headers=NDJSON
        )
        assert imported.status_code == 201, imported.text
        new = imported.json()["session_id"]
        assert new != sid and imported.json()["events"] == header["events"]
        assert shown(http.get(f"/sessions/{new}").json()) == shown(
            http.get(f"/sessions/{sid}").json()
        )
        assert http.get(f"/sessions/{new}/verify").json()["ok"] is True

        # The imported session goes on like any other.
        navi_server.fake_llm.script(Reply(text="Three."))
        assert chat(http, new, "third question") == "Three."


def test_a_corrupt_or_truncated_import_is_refused_whole(navi_server: RunningServer) -> None:
    with client(navi_server) as http:
        sid = two_turns(navi_server, http)
        lines = http.get(f"/sessions/{sid}/export").content.splitlines()
        http.delete(f"/sessions/{sid}")
        before = http.get("/sessions").json()

        truncated = b"\n".join(lines[:-2]) + b"\n"
        refused = http.post("/sessions/import?as_new=1", content=truncated, headers=NDJSON)
        assert refused.status_code == 422
        assert refused.json()["error"].startswith(f"line {len(lines) - 1}:")
        assert "truncated" in refused.json()["error"]

        corrupt = list(lines)
        corrupt[3] = corrupt[3].replace(b'"seq":3', b'"seq":7')
        refused = http.post(
            "/sessions/import?as_new=1", content=b"\n".join(corrupt), headers=NDJSON
        )
        assert refused.status_code == 422 and refused.json()["error"].startswith("line 4:")

        garbage = list(lines)
        garbage[2] = b"{not json"
        refused = http.post(
            "/sessions/import?as_new=1", content=b"\n".join(garbage), headers=NDJSON
        )
        assert refused.status_code == 422 and refused.json()["error"].startswith("line 3:")

        assert http.post("/sessions/import", content=b"", headers=NDJSON).status_code == 400
        assert (
            http.post("/sessions/import?as_new=maybe", content=lines[0], headers=NDJSON).status_code
            == 400
        )
        assert http.get("/sessions").json() == before  # nothing was written


def test_timeline_and_verify(navi_server: RunningServer) -> None:
    navi_server.fake_llm.script(
        Reply(
            tool_calls=[
                FakeToolCall(name="todo", arguments={"action": "set", "items": [{"text": "a"}]})
            ]
        ),
        Reply(text="Done."),
    )
    with client(navi_server) as http:
        sid = new_session(http)
        chat(http, sid, "go")
        head = events_of(http, sid)[-1]["seq"]
        timeline = http.get(f"/sessions/{sid}/timeline").json()
        assert timeline["head"] == head
        [lane] = timeline["lanes"]
        assert lane["id"] == sid and len(lane["t"]) == len(lane["type"]) == head
        assert lane["t"] == sorted(lane["t"])
        assert timeline["types"][lane["type"][0]] == "session.created"
        kinds = [s["kind"] for s in lane["spans"]]
        assert kinds.count("run") == 1 and kinds.count("llm") == 2 and kinds.count("tool") == 1
        tool = next(s for s in lane["spans"] if s["kind"] == "tool")
        assert tool["label"] == "todo" and tool["ok"] and tool["first"] < tool["last"]
        assert all(s["duration"] >= 0 and not s["open"] for s in lane["spans"])

        report = http.get(f"/sessions/{sid}/verify").json()
        assert report["ok"] is True and report["differences"] == []
        assert http.get("/sessions/nope/timeline").status_code == 404
        assert http.get("/sessions/nope/verify").status_code == 404
        assert http.get("/sessions/nope/export").status_code == 404


def test_another_users_session_is_not_found(tmp_path: Path) -> None:
    from navi.server.auth import User, Users

    users = Users(
        [User(id="alice", token="a" * 20, role="admin"), User(id="bob", token="b" * 20)],
        open_access=False,
    )
    with navi_server_for(tmp_path, users=users) as server:
        server.fake_llm.script(Reply(text="Hi Alice."))
        with client(server, "a" * 20) as alice, client(server, "b" * 20) as bob:
            sid = new_session(alice)
            chat(alice, sid, "hello")
            export = alice.get(f"/sessions/{sid}/export").content
            for method, path, body in [
                ("GET", f"/sessions/{sid}/state", None),
                ("GET", f"/sessions/{sid}/llm-requests/3", None),
                ("GET", f"/sessions/{sid}/timeline", None),
                ("GET", f"/sessions/{sid}/export", None),
                ("GET", f"/sessions/{sid}/verify", None),
                ("POST", f"/sessions/{sid}/fork", {"at": 1}),
            ]:
                response = bob.request(method, path, json=body)
                assert response.status_code == 404, (path, response.text)
            # Bob's copy of the file is his: the imported session is his, not Alice's.
            copy = bob.post("/sessions/import?as_new=true", content=export, headers=NDJSON)
            assert copy.status_code == 201 and copy.json()["owner"] == "bob"
            assert [s["session_id"] for s in bob.get("/sessions").json()] == [
                copy.json()["session_id"]
            ]
            assert [s["session_id"] for s in alice.get("/sessions").json()] == [sid]
            assert alice.post(f"/sessions/{sid}/fork", json={"at": 1}).status_code == 201


@pytest.mark.parametrize("path", ["/sessions/{sid}/state?at=abc", "/sessions/{sid}/state?at=-3"])
def test_bad_seqs_are_400(navi_server: RunningServer, path: str) -> None:
    with client(navi_server) as http:
        sid = new_session(http)
        response = http.get(path.format(sid=sid))
        assert response.status_code == 400 and response.json()["error"]


def test_recompress_summarises_again_and_waits(tmp_path: Path) -> None:
    with navi_server_for(tmp_path, compression_keep_recent=1) as server, client(server) as http:
        server.fake_llm.script(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
        sid = new_session(http)
        for text in ("first", "second", "third"):
            chat(http, sid, text)
        fork = http.post(f"/sessions/{sid}/fork", json={"at": events_of(http, sid)[-1]["seq"]})
        fork_id = fork.json()["session_id"]

        server.fake_llm.script(Reply(text="- the user asked three things"))
        done = http.post(f"/sessions/{sid}/recompress", json={"model": "other-model:latest"})
        assert done.status_code == 200, done.text
        body = done.json()
        assert body["status"] == "compressed" and body["event"]["model"] == "other-model:latest"
        assert body["event"]["summary"].endswith("- the user asked three things")
        assert server.fake_llm.requests[-1]["model"] == "other-model:latest"
        context = http.get(f"/sessions/{sid}/context").json()["messages"]
        assert context[0]["is_summary"] and "three things" in context[0]["content"]

        # A fork's recompression is its own; the origin keeps its summary.
        server.fake_llm.script(Reply(text="- a fork's summary"))
        forked = http.post(f"/sessions/{fork_id}/recompress")
        assert forked.status_code == 200, forked.text
        assert forked.json()["seq"] == events_of(http, fork_id)[-1]["seq"]  # a history seq
        assert (
            "fork's summary"
            in http.get(f"/sessions/{fork_id}/context").json()["messages"][0]["content"]
        )
        assert (
            "three things" in http.get(f"/sessions/{sid}/context").json()["messages"][0]["content"]
        )

        bad = http.post(f"/sessions/{sid}/recompress", json={"model": 3})
        assert bad.status_code == 422
        assert http.post("/sessions/nope/recompress").status_code == 404
        empty = new_session(http)
        nothing = http.post(f"/sessions/{empty}/recompress")
        assert nothing.status_code == 400 and "nothing to summarise" in nothing.json()["error"]


def test_the_openapi_document_describes_the_replay_endpoints(navi_server: RunningServer) -> None:
    with client(navi_server) as http:
        paths = http.get("/openapi.json").json()["paths"]
    fork = paths["/sessions/{session_id}/fork"]["post"]
    assert fork["requestBody"]["content"]["application/json"]["schema"]["required"] == ["at"]
    imported = paths["/sessions/import"]["post"]
    assert "application/x-ndjson" in imported["requestBody"]["content"]
    assert [p["name"] for p in imported["parameters"]] == ["as_new"]
    state = paths["/sessions/{session_id}/state"]["get"]
    assert {p["name"] for p in state["parameters"]} == {"session_id", "at"}
    for path in ("timeline", "export", "verify", "recompress", "llm-requests/{seq}"):
        assert f"/sessions/{{session_id}}/{path}" in paths


def test_a_fork_recovers_after_a_server_restart(tmp_path: Path) -> None:
    with navi_server_for(tmp_path) as server, client(server) as http:
        origin = two_turns(server, http)
        second = seq_of(events_of(http, origin), "user.message", 1)
        fork = http.post(f"/sessions/{origin}/fork", json={"at": second - 1}).json()["session_id"]
        server.fake_llm.script(Reply(text="Fork one."))
        chat(http, fork, "fork question")
    with navi_server_for(tmp_path) as server, client(server) as http:
        # A new process: the fork's actor recovers from its history, appends at its own seq.
        server.fake_llm.script(Reply(text="Fork two."))
        assert chat(http, fork, "another fork question") == "Fork two."
        sent = [m["content"] for m in server.fake_llm.requests[-1]["messages"]]
        assert sent[-5:] == ["first question", "One.", "fork question", "Fork one.",
                             "another fork question"]  # fmt: skip
        events = events_of(http, fork)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert http.get(f"/sessions/{fork}/verify").json()["ok"] is True
        assert shown(http.get(f"/sessions/{origin}").json())[-1] == ("assistant", "Two.")


def test_another_users_replay_socket_is_closed_as_not_found(tmp_path: Path) -> None:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    from navi.server.auth import User, Users

    users = Users([User(id="alice", token="a" * 20), User(id="bob", token="b" * 20)],
                  open_access=False)  # fmt: skip
    with navi_server_for(tmp_path, users=users) as server:
        with client(server, "a" * 20) as alice:
            sid = new_session(alice)
        url = f"{server.ws_url}/ws/sessions/{sid}/replay"
        bob = {"Authorization": f"Bearer {'b' * 20}"}
        with connect(url, additional_headers=bob) as ws, pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4004
        with connect(url, additional_headers={"Authorization": f"Bearer {'a' * 20}"}) as ws:
            assert json.loads(ws.recv(timeout=10))["type"] == "replay_status"
