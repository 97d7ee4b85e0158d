"""Following a ``/v1`` run (navi/server/openai/runs.py, ledger.py) against a
real ``navi serve``: a client of the official ``openai`` package whose first attempt
times out retries into the same run (one session, one run), an ``Idempotency-Key``
gives the same run again, and a stream says where a waiting call is approved. Each on
SQLite (the ledger in the node's memory) and on PostgreSQL (the ledger in its table,
navi/server/openai/ledger_pg.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.security.conftest import NaviServerProcess, StartNavi, start_navi
from tests.support.fake_llm_script import FakeToolCall, Reply
from tests.support.postgres import fresh_database

__all__ = ["start_navi"]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The environment of a server on SQLite, or on a PostgreSQL database of its own."""
    if request.param == "sqlite":
        yield {}
        return
    server_url = os.environ.get("NAVI_TEST_POSTGRES_URL")
    if not server_url:
        pytest.skip("PostgreSQL tests need NAVI_TEST_POSTGRES_URL")
    with fresh_database(server_url, "navi_v1") as url:
        yield {"NAVI_DATABASE_URL": url}


ASK: Any = [{"role": "user", "content": "Take your time, then say hello."}]


def _loop_calls(server: NaviServerProcess) -> int:
    return len([r for r in server.llm.requests if r.get("tools")])


def test_a_client_whose_first_attempt_fails_gets_one_session_and_one_run(
    start_navi: StartNavi, database: dict[str, str]
) -> None:
    server = start_navi(env=database, canary_row=False)
    server.llm.script(Reply(text="Hello at last.", delay_first=3.0))
    # The first attempt times out after 2 s and the client tries again, same body.
    with openai.OpenAI(
        base_url=server.url + "/v1", api_key="none", max_retries=2, timeout=2.0
    ) as api:
        raw = api.chat.completions.with_raw_response.create(model="navi/secretary", messages=ASK)
    answer = raw.parse()
    assert answer.choices[0].message.content == "Hello at last."
    assert raw.headers["idempotent-replayed"] == "true"
    assert raw.retries_taken >= 1
    with server.client() as http:
        sessions = http.get("/sessions").json()
    assert [s["session_id"] for s in sessions] == [raw.headers["x-navi-session"]]
    assert _loop_calls(server) == 1
    messages = server.session(raw.headers["x-navi-session"])["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]


def test_an_idempotency_key_gives_the_same_run_again(
    start_navi: StartNavi, database: dict[str, str]
) -> None:
    server = start_navi(env=database, canary_row=False)
    server.llm.script(Reply(text="Once."), Reply(text="Twice."))
    body = {"model": "navi/secretary", "messages": ASK}
    key = {"idempotency-key": "order-4711"}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        first = http.post("/v1/chat/completions", json=body, headers=key)
        streamed = http.post("/v1/chat/completions", json={**body, "stream": False}, headers=key)
        assert first.status_code == streamed.status_code == 200
        assert first.json()["id"] == streamed.json()["id"]
        assert streamed.json()["choices"][0]["message"]["content"] == "Once."
        assert streamed.headers["idempotent-replayed"] == "true"
        # The same key for another request: refused, nothing runs.
        other = {"model": "navi/secretary", "messages": [{"role": "user", "content": "no"}]}
        reused = http.post("/v1/chat/completions", json=other, headers=key)
        assert reused.status_code == 400
        assert reused.json()["error"]["code"] == "idempotency_key_reused"
        # Another key: another run.
        again = http.post("/v1/chat/completions", json=body, headers={"idempotency-key": "b"})
        assert again.json()["choices"][0]["message"]["content"] == "Twice."
    assert _loop_calls(server) == 2


def test_a_stream_says_where_a_waiting_call_is_approved_then_goes_on(
    start_navi: StartNavi,
) -> None:
    server = start_navi(env={"NAVI_TOOL_APPROVAL": ""}, canary_row=False)
    code = FakeToolCall(name="code_exec", arguments={"code": "print('hi')"})
    server.llm.script(Reply(tool_calls=[code]), Reply(text="Not run, as you wished."))
    body = {"model": "navi/secretary", "messages": ASK, "stream": True}
    texts: list[str] = []
    with (
        httpx.Client(base_url=server.url, timeout=60) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        session_id = response.headers["x-navi-session"]
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            choices = json.loads(line.removeprefix("data: "))["choices"]
            text = choices[0]["delta"].get("content") if choices else None
            if not text:
                continue
            texts.append(text)
            if "Waiting for your approval" in text:
                [request] = server.pending(session_id)
                with server.client() as decide:
                    decided = decide.post(
                        f"/sessions/{session_id}/approvals/{request['call_id']}",
                        json={"decision": "deny", "reason": "not now"},
                    )
                    assert decided.status_code == 200, decided.text
    content = "".join(texts)
    assert f"{server.url}/#{session_id}" in content
    assert f"navi approvals {session_id}" in content
    assert content.endswith("Not run, as you wished.")
