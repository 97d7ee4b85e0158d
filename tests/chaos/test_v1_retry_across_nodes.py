"""A ``/v1`` retry that a balancer sends to another node follows the run the first
attempt started (navi/server/openai/ledger_pg.py): two real ``navi serve`` nodes on one
PostgreSQL, the official ``openai`` client, its first attempt on node A timing out and
its retry landing on node B. One session, one run, one LLM call, the answer on B; and A,
whose client hung up, does not stop the run B's client follows (its grace asks the
shared ledger)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest

from tests.chaos.harness import NaviProcess, ServerConfig, install_tools, read_logs
from tests.support.fake_llm import FakeLLMServer, RecordedRequest, Reply

pytestmark = pytest.mark.postgres

ASK: Any = [{"role": "user", "content": "Take your time, then say hello."}]


class FirstToATheRestToB(httpx.HTTPTransport):
    """A balancer: the first attempt goes to node A and is cut after 1 s (a read
    timeout, as a client or a proxy gives up), every later one to node B."""

    def __init__(self, b_port: int) -> None:
        super().__init__()
        self.b_port = b_port
        self.sent: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.sent:
            request.url = request.url.copy_with(port=self.b_port)
        else:
            request.extensions["timeout"] = {"connect": 5, "read": 1.0, "write": 5, "pool": 5}
        self.sent.append(request.url.port or 0)
        return super().handle_request(request)


def answer(request: RecordedRequest) -> Reply:
    """The turn's answer comes after longer than the cut (1 s) and A's grace for a
    retry (5 s) together; the other requests (a title, …) at once."""
    body = request.body if isinstance(request.body, dict) else {}
    if body.get("tools"):
        return Reply(text="Hello at last.", delay_first=8.0)
    return Reply(text="A title")


async def test_the_retry_on_the_other_node_follows_the_same_run(
    tmp_path: Path, chaos_db: str
) -> None:
    tools, effects = install_tools(tmp_path)
    with FakeLLMServer.in_thread(responder=answer) as llm:
        slow = {"LLM_STREAM_FIRST_CHUNK_TIMEOUT": "30"}
        config = ServerConfig(tmp_path, chaos_db, llm.url, effects, tools, extra_env=slow)
        a, b = NaviProcess(config, "a"), NaviProcess(config, "b")
        a.start()
        b.start()
        try:
            with anyio.fail_after(60):
                await a.wait_up()
                await b.wait_up()
            balancer = FirstToATheRestToB(b.port)
            with (
                httpx.Client(transport=balancer, timeout=30) as http,
                openai.OpenAI(
                    base_url=a.url + "/v1", api_key="none", max_retries=2, http_client=http
                ) as api,
            ):
                raw = await anyio.to_thread.run_sync(
                    lambda: api.chat.completions.with_raw_response.create(
                        model="navi/secretary", messages=ASK
                    )
                )
            async with httpx.AsyncClient(timeout=10) as client:
                on_a = (await client.get(a.url + "/sessions")).json()
                on_b = (await client.get(b.url + "/sessions")).json()
        finally:
            a.terminate()
            b.terminate()
        loop_calls = len([r for r in llm.requests if r.get("tools")])
    assert balancer.sent == [a.port, b.port]
    assert raw.parse().choices[0].message.content == "Hello at last."
    assert raw.headers["idempotent-replayed"] == "true" and raw.retries_taken == 1
    session = raw.headers["x-navi-session"]
    assert [s["session_id"] for s in on_a] == [s["session_id"] for s in on_b] == [session]
    assert loop_calls == 1
    types = [r.type for r in (await read_logs(chaos_db, [session]))[session]]
    assert types.count("run.started") == 1 and types.count("run.completed") == 1
    assert "stop.requested" not in types
