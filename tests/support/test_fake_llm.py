"""The fake LLM server itself: real clients accept it, and every way of driving it works."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx
import msgspec
import ollama
import pytest

from tests.support.fake_llm import (
    FakeLLMProcess,
    FakeLLMServer,
    FakeToolCall,
    RecordedRequest,
    Reply,
    load_script,
)

pytestmark = pytest.mark.anyio

CHAT = {"model": "llama3.2", "messages": [{"role": "user", "content": "hi"}]}
WEATHER = FakeToolCall(name="get_weather", arguments={"city": "Paris", "days": 2})


async def test_the_official_ollama_client_accepts_the_stream() -> None:
    replies = [
        Reply(thinking="Let me see.", text="It is sunny."),
        Reply(tool_calls=[WEATHER, FakeToolCall(name="get_time")]),
        Reply(tool_calls=[WEATHER], tool_call_ids="none"),
    ]
    async with FakeLLMServer(replies) as fake, ollama.AsyncClient(host=fake.url) as client:
        stream = await client.chat("llama3.2", CHAT["messages"], stream=True)
        parts = [part async for part in stream]
        assert "".join(p.message.thinking or "" for p in parts) == "Let me see."
        assert "".join(p.message.content or "" for p in parts) == "It is sunny."
        assert parts[-1].done and parts[-1].done_reason == "stop"
        assert parts[-1].prompt_eval_count == 10 and parts[-1].eval_count == 6
        for _ in range(2):  # a new server (ids, index) then an old one
            stream = await client.chat("llama3.2", CHAT["messages"], stream=True)
            calls = [c async for p in stream for c in (p.message.tool_calls or [])]
            assert calls[0].function.name == "get_weather"
            assert calls[0].function.arguments == {"city": "Paris", "days": 2}
        listed = await client.list()
        assert [m.model for m in listed.models] == ["fake-model:latest"]


async def test_the_ollama_client_non_streaming_and_errors() -> None:
    replies = [
        Reply(text="whole answer"),
        Reply.model_not_found(),
        Reply(text="a b", error_during="runner died"),
    ]
    async with FakeLLMServer(replies) as fake, ollama.AsyncClient(host=fake.url) as client:
        whole = await client.chat("llama3.2", CHAT["messages"])
        assert whole.message.content == "whole answer" and whole.done
        with pytest.raises(ollama.ResponseError) as caught:
            await client.chat("gone:1b", CHAT["messages"])
        assert caught.value.status_code == 404
        assert 'model "gone:1b" not found' in caught.value.error
        with pytest.raises(ollama.ResponseError, match="runner died"):
            async for _ in await client.chat("llama3.2", CHAT["messages"], stream=True):
                pass


async def test_ndjson_lines_are_exactly_as_ollama_writes_them() -> None:
    async with FakeLLMServer() as fake:
        fake.script(Reply(thinking="t", text="a b", tool_calls=[WEATHER]))
        async with httpx.AsyncClient() as client:
            response = await client.post(fake.url + "/api/chat", json=CHAT)
        assert response.headers["content-type"] == "application/x-ndjson"
        assert response.headers["transfer-encoding"] == "chunked"
        raw_lines = response.content.split(b"\n")
        assert raw_lines[-1] == b""  # every line ends with a newline...
        objects = [json.loads(line) for line in raw_lines[:-1]]  # ...and none is blank
        assert all(o["message"]["role"] == "assistant" for o in objects)
        assert all("done_reason" not in o and "eval_count" not in o for o in objects[:-1])
        call = objects[-2]["message"]["tool_calls"][0]
        assert call["function"]["arguments"] == {"city": "Paris", "days": 2}
        assert call["id"] and call["function"]["index"] == 0
        assert objects[-1]["done"] is True and objects[-1]["done_reason"] == "stop"


async def test_sse_events_are_exactly_as_openai_servers_write_them() -> None:
    async with FakeLLMServer() as fake:
        fake.script(Reply(text="hi", usage="separate"))
        async with httpx.AsyncClient() as client:
            response = await client.post(
                fake.url + "/v1/chat/completions", json=CHAT | {"stream": True}
            )
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [e for e in response.text.split("\n\n") if e]
        assert all(e.startswith("data: ") for e in events)
        assert events[-1] == "data: [DONE]"
        decoded = [json.loads(e[6:]) for e in events[:-1]]
        assert decoded[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert decoded[-2]["choices"][0]["finish_reason"] == "stop"
        assert decoded[-1]["choices"] == [] and decoded[-1]["usage"]["completion_tokens"] == 1


async def test_non_streaming_openai_answer() -> None:
    async with FakeLLMServer() as fake:
        fake.script(Reply(text="whole", tool_calls=[WEATHER]))
        async with httpx.AsyncClient() as client:
            response = await client.post(fake.url + "/v1/chat/completions", json=CHAT)
        choice = response.json()["choices"][0]
        assert choice["message"]["content"] == "whole"
        assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == {
            "city": "Paris",
            "days": 2,
        }
        assert choice["finish_reason"] == "tool_calls"


async def test_script_responder_default_and_running_out() -> None:
    def echo(request: RecordedRequest) -> Reply:
        return Reply(text="echo: " + request.body["messages"][-1]["content"])

    async with (
        FakeLLMServer([Reply(text="scripted")], responder=echo) as fake,
        httpx.AsyncClient() as client,
    ):
        first = await client.post(fake.url + "/api/chat", json=CHAT | {"stream": False})
        second = await client.post(fake.url + "/api/chat", json=CHAT | {"stream": False})
        assert first.json()["message"]["content"] == "scripted"
        assert second.json()["message"]["content"] == "echo: hi"
        assert fake.requests == [CHAT | {"stream": False}] * 2
    async with FakeLLMServer(default=Reply(text="default")) as fake, httpx.AsyncClient() as client:
        answer = await client.post(fake.url + "/api/chat", json=CHAT | {"stream": False})
        assert answer.json()["message"]["content"] == "default"
    async with FakeLLMServer() as fake, httpx.AsyncClient() as client:
        answer = await client.post(fake.url + "/api/chat", json=CHAT)
        assert answer.status_code == 500 and "no scripted reply left" in answer.json()["error"]


async def test_bad_requests_get_clear_errors() -> None:
    async with FakeLLMServer() as fake, httpx.AsyncClient() as client:
        bad_json = await client.post(fake.url + "/api/chat", content=b"{nope")
        assert bad_json.status_code == 400 and "not valid JSON" in bad_json.json()["error"]
        unknown = await client.get(fake.url + "/api/unknown")
        assert unknown.status_code == 404
        bad_script = await client.post(fake.url + "/_fake/script", json=[{"txet": "typo"}])
        assert bad_script.status_code == 400 and "txet" in bad_script.json()["error"]


@pytest.mark.parametrize(
    "head",
    [
        b"NONSENSE\r\n\r\n",
        b"POST /api/chat HTTP/1.1\r\nno colon here\r\n\r\n",
        b"POST /api/chat HTTP/1.1\r\ncontent-length: lots\r\n\r\n",
    ],
)
async def test_malformed_http_gets_a_400(head: bytes) -> None:
    async with FakeLLMServer() as fake:
        async with await anyio.connect_tcp("127.0.0.1", fake.port) as stream:
            await stream.send(head)
            answer = b""
            with anyio.fail_after(5):
                async for data in stream:
                    answer += data
        assert answer.startswith(b"HTTP/1.1 400 ")
        # The server lives on.
        async with httpx.AsyncClient() as client:
            assert (await client.get(fake.url + "/api/version")).status_code == 200


def test_runs_in_a_background_thread() -> None:
    with FakeLLMServer.in_thread(default=Reply(text="from a thread")) as fake:
        response = httpx.post(fake.url + "/api/chat", json=CHAT | {"stream": False}, timeout=10)
        assert response.json()["message"]["content"] == "from a thread"
        assert fake.requests[0]["model"] == "llama3.2"


def test_runs_as_a_process_driven_over_http(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_bytes(
        msgspec.json.encode([Reply(text="first"), Reply(thinking="t", text="second")])
    )
    assert load_script(script)[1].thinking == "t"
    with FakeLLMProcess(script_file=script, default_text="fallback") as fake:
        fake.script(Reply(text="third"))
        answers = [
            httpx.post(fake.url + "/api/chat", json=CHAT | {"stream": False}, timeout=10).json()
            for _ in range(4)
        ]
        assert [a["message"]["content"] for a in answers] == [
            "first",
            "second",
            "third",
            "fallback",
        ]
        assert len(fake.requests) == 4
        assert fake.state["pending"] == 0
