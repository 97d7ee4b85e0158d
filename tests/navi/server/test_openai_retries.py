"""Retries of ``/v1`` are safe (navi/server/openai_ledger.py), with the official
``openai`` client against a real ``navi serve``: a client whose first attempt times out
retries into the same run (one session, one run), and an ``Idempotency-Key`` gives the
same run again."""

from __future__ import annotations

from typing import Any

import httpx
import openai

from tests.security.conftest import NaviServerProcess, StartNavi, start_navi
from tests.support.fake_llm_script import Reply

__all__ = ["start_navi"]

ASK: Any = [{"role": "user", "content": "Take your time, then say hello."}]


def _loop_calls(server: NaviServerProcess) -> int:
    return len([r for r in server.llm.requests if r.get("tools")])


def test_a_client_whose_first_attempt_fails_gets_one_session_and_one_run(
    start_navi: StartNavi,
) -> None:
    server = start_navi(canary_row=False)
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


def test_an_idempotency_key_gives_the_same_run_again(start_navi: StartNavi) -> None:
    server = start_navi(canary_row=False)
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
