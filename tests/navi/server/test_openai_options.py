"""``/v1`` keeps its word on what a request asks of the model, with the official
``openai`` client against a real ``navi serve``: ``temperature``, ``max_tokens``,
``stop`` and ``response_format`` reach the backend's request (Ollama's and an
OpenAI-compatible server's wire, read from the fake LLM's request log), a JSON answer
is checked against its schema, and what cannot be kept is a clear 400."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from events.types import CallOptions
from navi.server.openai.errors import OpenAIError
from navi.server.openai.options import answer_mismatch, refuse_unshapeable
from tests.security.conftest import (
    NaviServerProcess,
    StartNavi,
    fresh,
    start_module_navi,
    start_navi,
)
from tests.support.fake_llm_script import FakeToolCall, Reply

__all__ = ["start_module_navi", "start_navi"]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}
WEATHER: Any = {"type": "json_schema", "json_schema": {"name": "weather", "schema": SCHEMA}}
ASK: Any = [{"role": "user", "content": "The weather in Paris, as JSON."}]

_clients: list[openai.OpenAI] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _clients:
        _clients.pop().close()


@pytest.fixture(scope="module")
def _ollama(start_module_navi: StartNavi) -> NaviServerProcess:
    return start_module_navi(canary_row=False)


@pytest.fixture
def server(_ollama: NaviServerProcess) -> NaviServerProcess:
    return fresh(_ollama)


def client(server: NaviServerProcess, *, retries: int = 0) -> openai.OpenAI:
    api = openai.OpenAI(
        base_url=server.url + "/v1", api_key="no-token", max_retries=retries, timeout=60
    )
    _clients.append(api)
    return api


def create(server: NaviServerProcess, *, retries: int = 0, **body: Any) -> Any:
    """``chat.completions.create`` of the official client (its overloads want literal
    types; a test's bodies are plain dicts)."""
    return client(server, retries=retries).chat.completions.create(model="navi/secretary", **body)


def test_options_and_a_schema_reach_ollama_and_the_answer_keeps_it(
    server: NaviServerProcess,
) -> None:
    server.llm.script(Reply(text='{"city": "Paris", "celsius": 21.5}'))
    answer = create(
        server,
        messages=ASK,
        response_format=WEATHER,
        temperature=0.3,
        max_tokens=77,
        stop=["END", "###"],
    )
    assert json.loads(answer.choices[0].message.content or "") == {
        "city": "Paris",
        "celsius": 21.5,
    }
    [request] = [r for r in server.llm.requests if r.get("tools")]
    assert request["format"] == SCHEMA
    options = request["options"]
    assert options["temperature"] == 0.3 and options["num_predict"] == 77
    assert options["stop"] == ["END", "###"]
    # The next request of the same conversation, without them: the profile's again.
    server.llm.reset()
    server.llm.script(Reply(text="Mild."))
    create(
        server,
        messages=[
            *ASK,
            {"role": "assistant", "content": answer.choices[0].message.content},
            {"role": "user", "content": "And in words?"},
        ],
    )
    [again] = [r for r in server.llm.requests if r.get("tools")]
    assert "format" not in again and "stop" not in again["options"]
    assert "num_predict" not in again["options"]


def test_an_answer_that_breaks_the_schema_is_an_error_streamed_or_not(
    server: NaviServerProcess,
) -> None:
    server.llm.script(Reply(text='{"city": "Paris"}'), Reply(text="Sunny, 21 degrees."))
    with pytest.raises(openai.APIStatusError) as caught:
        create(
            server,
            messages=ASK,
            response_format=WEATHER,
        )
    assert caught.value.status_code == 502
    assert caught.value.code == "response_format_mismatch"
    assert "'celsius' is a required property" in caught.value.message
    stream = create(
        server,
        messages=[{"role": "user", "content": "Now as a JSON object."}],
        response_format={"type": "json_object"},
        stream=True,
    )
    with pytest.raises(openai.APIError) as streamed:
        list(stream)
    assert "the answer is not JSON" in streamed.value.message


def test_after_a_tool_acted_a_failure_is_not_retried(server: NaviServerProcess) -> None:
    server.llm.script(
        Reply(tool_calls=[FakeToolCall(name="scratchpad", arguments={"action": "read"})]),
        Reply(text="not json at all"),
    )
    # The client would retry a 5xx twice: it gets a 422 it does not retry.
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        create(
            server,
            retries=2,
            messages=ASK,
            response_format={"type": "json_object"},
        )
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert len([r for r in server.llm.requests if r.get("tools")]) == 2


@pytest.mark.parametrize(
    ("response_format", "code"),
    [
        ({"type": "grammar", "grammar": "root ::= x"}, "response_format_not_supported"),
        ({"type": "json_schema", "json_schema": {"name": "x"}}, "invalid_request_error"),
        (
            {"type": "json_schema", "json_schema": {"schema": {"type": "wizard"}}},
            "invalid_request_error",
        ),
    ],
)
def test_a_response_format_navi_cannot_keep_is_a_400(
    server: NaviServerProcess, response_format: dict[str, Any], code: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        create(
            server,
            messages=ASK,
            response_format=response_format,
        )
    assert caught.value.code == code
    assert server.llm.requests == []


def test_bad_options_are_400s(server: NaviServerProcess) -> None:
    for options in ({"temperature": 3}, {"max_tokens": 0}, {"stop": ["a", "b", "c", "d", "e"]}):
        with pytest.raises(openai.BadRequestError):
            client(server).chat.completions.create(
                model="navi/secretary",
                messages=ASK,
                **options,
            )
    assert server.llm.requests == []


def test_options_reach_an_openai_compatible_server(start_navi: StartNavi) -> None:
    server = start_navi(
        env={"NAVI_LLM_BACKEND": "openai", "OPENAI_BASE_URL": "{llm_url}/v1"},
        canary_row=False,
    )
    server.llm.script(Reply(text='{"city": "Oslo", "celsius": -3}'))
    answer = create(
        server,
        messages=ASK,
        response_format=WEATHER,
        temperature=0.0,
        max_completion_tokens=50,
        stop="END",
    )
    assert json.loads(answer.choices[0].message.content or "")["city"] == "Oslo"
    [request] = [r for r in server.llm.requests if r.get("tools")]
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "weather", "schema": SCHEMA},
    }
    assert request["temperature"] == 0.0 and request["max_tokens"] == 50
    assert request["stop"] == ["END"]


def test_the_embedded_model_driving_tools_cannot_keep_a_format() -> None:
    asked = CallOptions(response_format={"type": "json_object"})
    with pytest.raises(OpenAIError) as caught:
        refuse_unshapeable(asked, "embedded", embedded_tools=True)
    assert caught.value.status == 400 and caught.value.code == "response_format_not_supported"
    with pytest.raises(OpenAIError):
        refuse_unshapeable(asked, "missing", embedded_tools=False)
    for backend in ("ollama", "openai", "embedded"):
        refuse_unshapeable(asked, backend, embedded_tools=False)
    refuse_unshapeable(CallOptions(temperature=0.1), "embedded", embedded_tools=True)


def test_what_keeps_a_json_object_format() -> None:
    asked = CallOptions(response_format={"type": "json_object"})
    assert answer_mismatch('{"a": 1}', asked) is None
    assert answer_mismatch("[1, 2]", asked) == "the answer is JSON but not an object"
    assert answer_mismatch("anything", None) is None
