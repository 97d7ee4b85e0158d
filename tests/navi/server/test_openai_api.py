"""``/v1`` with the official ``openai`` client against a real ``navi serve`` (and, where a
test changes a module constant, the in-thread server): models, plain and streamed
completions with a tool call in the middle, history, continued conversations, images,
and errors in OpenAI's shape."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import openai
import pytest

from events.in_memory import InMemoryEventStore
from navi.blobs import BlobStore
from navi.run.state import RunState, state_at
from navi.server.openai import runs as openai_runs
from navi.server.openai.errors import OpenAIError
from navi.server.openai.history import seed_session, session_turns, turn_key
from navi.server.openai.wire import SYSTEM_NOTE, ChatMessageIn, conversation
from profiles import ProfileRegistry
from tests.security.conftest import (
    NaviServerProcess,
    StartNavi,
    fresh,
    start_module_navi,
    start_navi,
)
from tests.support.fake_llm_script import FakeToolCall, Reply
from tests.support.navi_server import RunningServer

__all__ = ["start_module_navi", "start_navi"]  # the fixtures, shared with the security suite

TOKEN = "v1-admin-token-0c5e2a7d9f"
# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture(scope="module")
def _module_server(start_module_navi: StartNavi) -> NaviServerProcess:
    return start_module_navi(canary_row=False)


@pytest.fixture
def server(_module_server: NaviServerProcess) -> NaviServerProcess:
    """One server for the module's tests (each makes its own sessions)."""
    return fresh(_module_server)


_clients: list[openai.OpenAI] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _clients:
        _clients.pop().close()


def client(server: NaviServerProcess, token: str | None = None) -> openai.OpenAI:
    api = openai.OpenAI(
        base_url=server.url + "/v1",
        api_key=token or server.token or "no-token-needed",
        max_retries=0,
        timeout=60,
    )
    _clients.append(api)
    return api


def chat_requests(server: NaviServerProcess) -> list[dict[str, Any]]:
    """The bodies of the chat requests the fake LLM got."""
    return server.llm.requests


def test_models_are_the_profiles(server: NaviServerProcess) -> None:
    models = client(server).models.list()
    ids = {model.id for model in models.data}
    assert {"navi/secretary", "navi/server_admin", "navi/smart_home"} <= ids
    assert all(model.owned_by == "navi" and model.object == "model" for model in models.data)
    assert client(server).models.retrieve("navi/secretary").id == "navi/secretary"
    with pytest.raises(openai.NotFoundError):
        client(server).models.retrieve("navi/nobody")


def test_a_completion_runs_a_whole_turn_with_its_tools(server: NaviServerProcess) -> None:
    server.llm.script(
        Reply(tool_calls=[FakeToolCall(name="scratchpad", arguments={"action": "read"})]),
        Reply(text="Your scratchpad is empty."),
    )
    raw = client(server).chat.completions.with_raw_response.create(
        model="navi/secretary", messages=[{"role": "user", "content": "What is in my notes?"}]
    )
    answer = raw.parse()
    assert answer.choices[0].message.content == "Your scratchpad is empty."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.model == "navi/secretary"
    assert answer.usage is not None and answer.usage.total_tokens > 0
    session_id = raw.headers["x-navi-session"]
    # A real session: the web client shows the user message, the call, its result, the answer.
    session = server.session(session_id)
    assert session["profile_id"] == "secretary"
    roles = [(m["role"], m.get("name")) for m in session["messages"]]
    assert roles == [
        ("user", None),
        ("assistant", None),
        ("tool", "scratchpad"),
        ("assistant", None),
    ]
    assert session["messages"][2]["success"] is True


def test_a_streamed_completion_with_a_tool_call_in_the_middle(server: NaviServerProcess) -> None:
    server.llm.script(
        Reply(
            text="Let me look.",
            tool_calls=[FakeToolCall(name="todo", arguments={"action": "list"})],
        ),
        Reply(thinking="The list is empty.", text="Nothing to do today."),
    )
    with client(server).chat.completions.with_streaming_response.create(
        model="navi/secretary",
        messages=[{"role": "user", "content": "What is on my list?"}],
        stream=True,
        stream_options={"include_usage": True},
    ) as raw:
        assert raw.headers["content-type"].startswith("text/event-stream")
        session_id = raw.headers["x-navi-session"]
        chunks = list(raw.parse())
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
        for c in chunks
        if c.choices
    )
    assert content == "Let me look.\n\nNothing to do today."
    assert reasoning == "The list is empty."
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0
    tools = [m for m in server.session(session_id)["messages"] if m["role"] == "tool"]
    assert [t["name"] for t in tools] == ["todo"]


def test_a_failed_run_is_an_error_streamed_or_not(server: NaviServerProcess) -> None:
    server.llm.script(Reply.model_not_found(), Reply.model_not_found())
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.APIStatusError) as caught:
        client(server).chat.completions.create(model="navi/secretary", messages=messages)  # type: ignore[arg-type]
    assert caught.value.status_code == 502 and caught.value.code == "run_failed"
    assert "the run failed: The model" in caught.value.message
    assert caught.value.response.headers["x-navi-session"]
    stream = client(server).chat.completions.create(
        model="navi/secretary",
        messages=messages,  # type: ignore[arg-type]
        stream=True,
    )
    with pytest.raises(openai.APIError) as streamed:
        list(stream)
    assert "the run failed" in streamed.value.message


def test_an_unknown_model_is_a_404_model_not_found(server: NaviServerProcess) -> None:
    for model in ("navi/nobody", "gpt-4o", "secretary"):
        with pytest.raises(openai.NotFoundError) as caught:
            client(server).chat.completions.create(
                model=model, messages=[{"role": "user", "content": "hi"}]
            )
        assert caught.value.code == "model_not_found"
        assert "GET /v1/models" in caught.value.message
    assert chat_requests(server) == []


def test_the_earlier_messages_become_the_history_and_the_system_prompt(
    server: NaviServerProcess,
) -> None:
    server.llm.script(Reply(text="Paris, still."))
    raw = client(server).chat.completions.with_raw_response.create(
        model="navi/secretary",
        messages=[
            {"role": "system", "content": "Answer in one line."},
            {"role": "user", "content": "Capital of France?"},
            {"role": "assistant", "content": "Paris."},
            {"role": "user", "content": "And now?"},
        ],
    )
    assert raw.parse().choices[0].message.content == "Paris, still."
    session = server.session(raw.headers["x-navi-session"])
    shown = [(m["role"], m["content"]) for m in session["messages"]]
    assert shown == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
        ("user", "And now?"),
        ("assistant", "Paris, still."),
    ]
    # Replayable like any session: its log folds and plays.
    with server.client() as http:
        session_id = raw.headers["x-navi-session"]
        for path in ("timeline", "export", "state"):
            assert http.get(f"/sessions/{session_id}/{path}").status_code == 200, path
        report = http.get(f"/sessions/{session_id}/verify").json()
        assert report["differences"] == [] and report["error"] is None
    [request] = chat_requests(server)
    sent = [(m["role"], m["content"]) for m in request["messages"]]
    # The profile's system prompt, then the client's, then the conversation.
    assert sent[0][0] == "system" and "Answer in one line." not in sent[0][1]
    assert sent[1:] == [
        ("system", "Answer in one line."),
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
        ("user", "And now?"),
    ]


def test_a_request_that_extends_a_conversation_continues_its_session(
    server: NaviServerProcess,
) -> None:
    api = client(server)
    server.llm.script(Reply(text="Noted: you like tea."), Reply(text="Tea, you said."))
    first = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "I like tea."},
    ]
    raw = api.chat.completions.with_raw_response.create(model="navi/secretary", messages=first)
    session_id = raw.headers["x-navi-session"]
    answer = raw.parse().choices[0].message.content
    second = [
        *first,
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "What do I like?"},
    ]
    with api.chat.completions.with_streaming_response.create(
        model="navi/secretary", messages=second, stream=True
    ) as streamed:
        assert streamed.headers["x-navi-session"] == session_id
        text = "".join(c.choices[0].delta.content or "" for c in streamed.parse() if c.choices)
    assert text == "Tea, you said."
    # The streamed answer sent back continues it too; an edited history does not.
    server.llm.script(Reply(text="Still tea."), Reply(text="A new start."))
    third = [*second, {"role": "assistant", "content": text}, {"role": "user", "content": "Sure?"}]
    raw = api.chat.completions.with_raw_response.create(model="navi/secretary", messages=third)
    assert raw.headers["x-navi-session"] == session_id
    edited = [
        *second,
        {"role": "assistant", "content": "Coffee."},
        {"role": "user", "content": "Sure?"},
    ]
    raw = api.chat.completions.with_raw_response.create(model="navi/secretary", messages=edited)
    assert raw.headers["x-navi-session"] != session_id
    messages = server.session(session_id)["messages"]
    assert [m["content"] for m in messages if m["role"] == "user"] == [
        "I like tea.",
        "What do I like?",
        "Sure?",
    ]
    # The LLM of the third turn saw the client's system prompt once, then the whole talk.
    third_request = chat_requests(server)[2]
    roles = [m["role"] for m in third_request["messages"]]
    assert roles == ["system", "system", "user", "assistant", "user", "assistant", "user"]


def test_a_continued_session_is_found_again_after_a_restart(server: NaviServerProcess) -> None:
    server.llm.script(Reply(text="One."), Reply(text="Two."))
    first = [{"role": "user", "content": "Count with me."}]
    raw = client(server).chat.completions.with_raw_response.create(
        model="navi/secretary", messages=first
    )
    session_id = raw.headers["x-navi-session"]
    server.restart()
    follow = [
        *first,
        {"role": "assistant", "content": "One."},
        {"role": "user", "content": "Next."},
    ]
    raw = client(server).chat.completions.with_raw_response.create(
        model="navi/secretary", messages=follow
    )
    assert raw.headers["x-navi-session"] == session_id
    assert raw.parse().choices[0].message.content == "Two."


def test_an_image_part_reaches_the_model(server: NaviServerProcess) -> None:
    server.llm.script(Reply(text="A tiny picture."))
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    answer = client(server).chat.completions.create(
        model="navi/secretary",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": url}},
                ],
            }
        ],
    )
    assert answer.choices[0].message.content == "A tiny picture."
    [request] = chat_requests(server)
    user = request["messages"][-1]
    assert user["content"] == "What is this?"
    assert [base64.b64decode(image) for image in user["images"]] == [PNG]


def test_client_tools_are_refused(server: NaviServerProcess) -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    for extra in (
        {"tools": [tool]},
        {"tool_choice": "required"},
        {"functions": [tool["function"]]},
    ):
        with pytest.raises(openai.BadRequestError) as caught:
            client(server).chat.completions.create(
                model="navi/secretary",
                messages=[{"role": "user", "content": "hi"}],
                **extra,  # type: ignore[arg-type]
            )
        assert caught.value.code == "tools_not_supported"
        assert "Navi runs its own tools on the server" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(
            model="navi/secretary",
            messages=[
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "42"},
                {"role": "user", "content": "and?"},
            ],
        )
    assert caught.value.code == "tools_not_supported"
    assert chat_requests(server) == []


def test_bad_bodies_are_400s_in_openai_shape(server: NaviServerProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for body in (
            b"{not json",
            b'{"model": "navi/secretary"}',
            b'{"model": "navi/secretary", "messages": []}',
            b'{"model": "navi/secretary", "messages": [{"role": "wizard", "content": "x"}]}',
            b'{"model": "navi/secretary", "messages": [{"role": "user", "content": "a"}, '
            b'{"role": "assistant", "content": "b"}]}',
        ):
            response = http.post(
                "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
            )
            assert response.status_code == 400, body
            error = response.json()["error"]
            assert error["type"] == "invalid_request_error" and error["message"], body
        # JSON only as application/json, as everywhere.
        response = http.post(
            "/v1/chat/completions", content=b"{}", headers={"content-type": "text/plain"}
        )
        assert response.status_code == 415
        assert "Content-Type" in response.json()["error"]["message"]
        assert http.get("/v1/nothing").json()["error"]["code"] == "not_found"
    assert chat_requests(server) == []


def test_no_token_is_a_401_in_openai_shape(start_navi: StartNavi) -> None:
    server = start_navi(users=[{"id": "admin", "token": TOKEN, "role": "admin"}], canary_row=False)
    for token in ("wrong-token-000000000000", None):
        headers = {"authorization": f"Bearer {token}"} if token else {}
        response = httpx.get(server.url + "/v1/models", headers=headers)
        assert response.status_code == 401
        error = response.json()["error"]
        assert error["code"] == "invalid_api_key" and "token" in error["message"]
    with pytest.raises(openai.AuthenticationError) as caught:
        client(server, token="wrong-token-000000000000").chat.completions.create(
            model="navi/secretary", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.code == "invalid_api_key"
    assert [m.id for m in client(server, TOKEN).models.list().data]


# ---------------------------------------------------------------- turns, without a server


def _messages(*pairs: tuple[str, Any]) -> list[ChatMessageIn]:
    return [msgspec.convert({"role": r, "content": c}, ChatMessageIn) for r, c in pairs]


def test_the_turns_of_a_request() -> None:
    turns = conversation(
        _messages(
            ("system", "Be brief."),
            ("developer", "Use metric units."),
            ("user", "a"),
            ("user", [{"type": "text", "text": "b"}]),
            ("assistant", ""),
            ("assistant", "c"),
            ("system", "Now be verbose."),
            ("user", "d"),
        )
    )
    assert [(t.role, t.text) for t in turns] == [
        ("system", "Be brief.\n\nUse metric units."),
        ("user", "a\n\nb"),
        ("assistant", "c"),
        ("user", SYSTEM_NOTE + "Now be verbose.\n\nd"),
    ]


@pytest.mark.parametrize(
    ("messages", "code"),
    [
        ([("user", "a"), ("assistant", "b")], "invalid_request_error"),
        ([("system", "a")], "invalid_request_error"),
        ([("user", "  ")], "invalid_request_error"),
        (
            [("user", [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}])],
            "invalid_image_url",
        ),
        (
            [("user", [{"type": "image_url", "image_url": {"url": "data:image/png,xyz"}}])],
            "invalid_image_url",
        ),
        (
            [("user", [{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@"}}])],
            "invalid_image_url",
        ),
        (
            [
                ("assistant", [{"type": "image_url", "image_url": "data:image/png;base64,AA=="}]),
                ("user", "x"),
            ],
            "invalid_request_error",
        ),
        ([("tool", "42"), ("user", "x")], "tools_not_supported"),
    ],
)
def test_requests_navi_cannot_take(messages: list[tuple[str, Any]], code: str) -> None:
    with pytest.raises(OpenAIError) as caught:
        conversation(_messages(*messages))
    assert caught.value.status == 400 and caught.value.code == code


async def test_a_seeded_session_holds_the_turns_it_was_made_of(tmp_path: Path) -> None:
    profile = ProfileRegistry.from_environ({}).get("secretary")
    turns = conversation(
        _messages(
            ("system", "Be brief."),
            (
                "user",
                [
                    {"type": "text", "text": "look"},
                    {
                        "type": "image_url",
                        "image_url": {
                            "url": "data:image/png;base64," + base64.b64encode(PNG).decode()
                        },
                    },
                ],
            ),
            ("assistant", "A dot."),
            ("user", "And?"),
        )
    )
    async with InMemoryEventStore() as store:
        blobs = BlobStore(tmp_path / "blobs", quota_bytes=1 << 20)
        try:
            session_id = await seed_session(
                store, profile=profile, user_id="alice", history=turns[:-1], blobs=blobs
            )
        finally:
            blobs.close()
        records = await store.read(session_id)
    assert state_at(records) == RunState.DONE  # at rest, ready for the live turn
    known = session_turns(records, run_active=False)
    assert known.matches([turn_key(t) for t in turns[:-1]])
    assert not known.matches([turn_key(t) for t in turns])
    other = [*turns[:-2], msgspec.structs.replace(turns[-2], text="A line.")]
    assert not known.matches([turn_key(t) for t in other])


# ---------------------------------------------------------------- the in-thread server


def _sse_lines(response: httpx.Response) -> list[str]:
    return [line for line in response.iter_lines() if line]


def test_a_silent_run_sends_keep_alive_comments(
    navi_server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(openai_runs, "KEEPALIVE_S", 0.2)
    navi_server.fake_llm.script(Reply(text="At last.", delay_first=1.5))
    body = {
        "model": "navi/secretary",
        "messages": [{"role": "user", "content": "Take your time."}],
        "stream": True,
    }
    with (
        httpx.Client(base_url=navi_server.url, timeout=30) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        lines = _sse_lines(response)
    assert lines.count(": keep-alive") >= 3
    data = [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    text = "".join(
        json.loads(d)["choices"][0]["delta"].get("content") or ""
        for d in data[:-1]
        if json.loads(d)["choices"]
    )
    assert text == "At last."


def _wait_for_stop(http: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        events = [
            json.loads(line)
            for line in http.get(f"/sessions/{session_id}/events").text.splitlines()
        ]
        if any(e["type"] == "run.stopped" for e in events):
            return events
        time.sleep(0.1)
    raise AssertionError("the run was not stopped")


@pytest.mark.parametrize("stream", [True, False])
def test_a_client_that_hangs_up_stops_the_run(navi_server: RunningServer, stream: bool) -> None:
    navi_server.fake_llm.script(
        Reply(text=["Start ", "of ", "a ", "long ", "answer"], stall_after=2)
    )
    body = {
        "model": "navi/secretary",
        "messages": [{"role": "user", "content": "Tell me a long story."}],
        "stream": stream,
    }
    with httpx.Client(base_url=navi_server.url, timeout=30) as http:
        if stream:
            with http.stream("POST", "/v1/chat/completions", json=body) as response:
                session_id = response.headers["x-navi-session"]
                for line in response.iter_lines():
                    if "Start" in line:
                        break  # leaving the block closes the connection
        else:
            with pytest.raises(httpx.ReadTimeout):
                http.post("/v1/chat/completions", json=body, timeout=1.5)
            [summary] = http.get("/sessions").json()
            session_id = summary["session_id"]
        events = _wait_for_stop(http, session_id)
        stops = [e["event"] for e in events if e["type"] == "stop.requested"]
        assert stops and stops[0]["reason"] == "client_disconnected"
        assert http.get(f"/sessions/{session_id}").json()["run_active"] is False
