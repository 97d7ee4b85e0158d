"""One user cannot fill the shared server (issue 29, point 4), against a real ``navi
serve``: what tools write in a user's session folders counts against
``NAVI_USER_QUOTA_MB`` (a call that leaves the user over it fails, clearly, and the
session goes on), and ``NAVI_USER_MAX_SESSIONS`` bounds the sessions a user keeps,
however they are made (created, forked, imported, a new ``/v1`` conversation).

Before: the filesystem tool wrote twice 0.6 MB past a 1 MB quota (only uploads and images
counted), and a user could make sessions without end.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.security.conftest import NaviServerProcess, StartNavi
from tests.support.fake_llm_script import FakeToolCall, Reply
from tools.sandbox import sandbox_status

ALICE = "alice-limits-token-0123456789"
BOB = "bob-limits-token-0123456789"
USERS: list[dict[str, Any]] = [
    {"id": "alice", "token": ALICE, "role": "admin"},
    {"id": "bob", "token": BOB, "role": "user"},
]
CHUNK = "x" * 600_000  # two of them pass a 1 MB quota
# The writes' contents fill the fake model's context: no compression (it would take the
# scripted replies for its summaries).
ENV = {"NAVI_USER_QUOTA_MB": "1", "CONTEXT_COMPRESSION_ENABLED": "false"}


def write(path: str, content: str) -> Reply:
    return Reply(
        tool_calls=[
            FakeToolCall(
                name="filesystem", arguments={"action": "write", "path": path, "content": content}
            )
        ]
    )


def delete(path: str) -> Reply:
    return Reply(
        tool_calls=[FakeToolCall(name="filesystem", arguments={"action": "delete", "path": path})]
    )


def turn(server: NaviServerProcess, session: str, *replies: Reply) -> list[dict[str, Any]]:
    """One turn in which the LLM makes each reply's call, then answers; the turn's tool
    results as the UI shows them."""
    seen = len(server.tool_messages(session))
    server.llm.script(*replies, Reply(text="done"))
    response = server.send(session, "go")
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "completed", response.text
    return server.tool_messages(session)[seen:]


def test_a_tool_that_writes_past_the_quota_fails_and_the_session_goes_on(
    start_navi: StartNavi,
) -> None:
    server = start_navi(env=ENV)
    session = server.create_session()
    folder = server.root / "files" / session
    first, second = turn(server, session, write("a.txt", CHUNK), write("b.txt", CHUNK))
    assert first["success"] and first["content"].startswith("Wrote"), first
    # The second write is done, and the call fails saying it passed the quota: the LLM
    # reads it (its context), the user too (the tool message).
    assert second["success"] is False and "storage quota exceeded" in second["content"], second
    assert "1 MB" in second["content"] and "NAVI_USER_QUOTA_MB" in second["content"]
    assert "storage quota exceeded" in str(server.llm.requests[-1]["messages"])
    assert (folder / "b.txt").stat().st_size == len(CHUNK)  # left for the user to sort out
    # Over the quota, a call that writes more fails too; the session itself goes on.
    (small,) = turn(server, session, write("c.txt", "more"))
    assert small["success"] is False and "storage quota exceeded" in small["content"], small
    reply = server.send(session, "just talk")
    assert reply.status_code == 200 and reply.json()["status"] == "completed", reply.text
    # An upload is refused as well, its bytes counted with the tools'.
    with server.client() as http:
        upload = http.post(f"/sessions/{session}/files", files={"file": ("d.bin", b"d" * 1000)})
        assert upload.status_code == 413 and "quota" in upload.json()["error"], upload.text
    # The way back stays open: a delete passes, over the quota or not; then writes do.
    freed, again = turn(server, session, delete("b.txt"), write("c.txt", "fits now"))
    assert freed["success"], freed
    assert again["success"] and again["content"].startswith("Wrote"), again
    assert sorted(p.name for p in folder.iterdir()) == ["a.txt", "c.txt"]


def test_another_users_quota_is_their_own(start_navi: StartNavi) -> None:
    """Alice's files do not count against Bob: his write of the same size passes."""
    server = start_navi(users=USERS, env=ENV, canary_row=False)
    alices = server.create_session(token=ALICE)
    assert (
        "storage quota exceeded"
        in turn(server, alices, write("a", CHUNK), write("b", CHUNK))[-1]["content"]
    )
    bobs = server.create_session(token=BOB)
    server.llm.script(write("a", CHUNK), Reply(text="done"))
    response = server.send(bobs, "go", token=BOB)
    assert response.status_code == 200, response.text
    (result,) = server.tool_messages(bobs, token=BOB)
    assert result["success"] and result["content"].startswith("Wrote"), result


def _export(server: NaviServerProcess, session: str, token: str) -> bytes:
    with server.client(token=token) as http:
        response = http.get(f"/sessions/{session}/export")
        assert response.status_code == 200, response.text
        return response.content


def test_the_session_limit_holds_for_every_way_a_session_is_made(start_navi: StartNavi) -> None:
    server = start_navi(users=USERS, env={"NAVI_USER_MAX_SESSIONS": "2"}, canary_row=False)
    first = server.create_session(token=ALICE)
    server.llm.script(Reply(text="hello"))
    assert server.send(first, "hi", token=ALICE).status_code == 200
    export = _export(server, first, ALICE)
    server.create_session(token=ALICE)
    with server.client(token=ALICE) as alice, server.client(token=BOB) as bob:
        before = alice.get("/sessions").json()
        refused = [
            alice.post("/sessions", json={}),
            alice.post(f"/sessions/{first}/fork", json={"at": 2}),
            alice.post(
                "/sessions/import?as_new=true",
                content=export,
                headers={"content-type": "application/x-ndjson"},
            ),
            alice.post(
                "/v1/chat/completions",
                json={"model": "navi/secretary", "messages": [{"role": "user", "content": "hi"}]},
            ),
        ]
        for response in refused:
            assert response.status_code == 403, response.text
            assert "NAVI_USER_MAX_SESSIONS" in response.text and "2 sessions" in response.text
        # Nothing was written: the same two sessions, no new stream in the log.
        assert alice.get("/sessions").json() == before
        # Bob's room is his own.
        assert bob.post("/sessions", json={}).status_code == 201
        # A deleted session frees its place.
        assert alice.delete(f"/sessions/{first}").status_code == 200
        assert alice.post("/sessions", json={}).status_code == 201
        assert alice.post("/sessions", json={}).status_code == 403
    assert not server.llm.requests[1:], "a refused /v1 request reached the LLM"


def test_a_burst_of_creations_cannot_pass_the_limit(start_navi: StartNavi) -> None:
    """Made one at a time per user: ten at once still leave exactly the limit."""
    import concurrent.futures

    server = start_navi(users=USERS, env={"NAVI_USER_MAX_SESSIONS": "3"}, canary_row=False)

    def create() -> int:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            headers = {"authorization": f"Bearer {BOB}"}
            return http.post("/sessions", json={}, headers=headers).status_code

    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        codes = sorted(pool.map(lambda _: create(), range(10)))
    assert codes == [201] * 3 + [403] * 7, codes
    with server.client(token=BOB) as bob:
        assert len(bob.get("/sessions").json()) == 3


def test_sandboxed_code_cannot_write_past_the_quota(start_navi: StartNavi) -> None:
    """What is left of the quota is the write limit of a sandboxed call: code that keeps
    writing files, each under any per-file limit, is ended, and the session goes on."""
    if not sandbox_status().available:
        pytest.skip(f"no bubblewrap sandbox here: {sandbox_status().reason}")
    server = start_navi(env={**ENV, "NAVI_TOOL_APPROVAL": "auto"})
    session = server.create_session()
    code = (
        "import time\n"
        "for i in range(20):\n"
        "    open(f'part{i}.bin', 'wb').write(b'x' * 500_000)\n"
        "    time.sleep(0.1)\n"
        "print('all written')\n"
    )
    call = FakeToolCall(name="code_exec", arguments={"code": code})
    (result,) = turn(server, session, Reply(tool_calls=[call]))
    assert result["success"] is False, result
    assert "all written" not in result["content"]
    written = sum(p.stat().st_size for p in (server.root / "files" / session).rglob("*.bin"))
    assert written < 10_000_000, written
    reply = server.send(session, "just talk")
    assert reply.status_code == 200 and reply.json()["status"] == "completed", reply.text
