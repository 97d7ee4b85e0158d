"""LangChain's ``ChatOpenAI`` against a real ``navi serve``'s ``/v1``, as its users wire
it: ``with_structured_output`` (JSON schema and JSON mode) gets a parsed object whose
schema reached the model's request, a plain ``invoke`` and a ``stream`` get the agent's
answer, and an answer that breaks the schema is an error, not prose handed on."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.security.conftest import NaviServerProcess, StartNavi, fresh, start_module_navi
from tests.support.fake_llm_script import Reply

langchain_openai = pytest.importorskip("langchain_openai", reason="the dev extra installs it")

__all__ = ["start_module_navi"]

WEATHER: dict[str, Any] = {
    "title": "weather",
    "description": "The weather in a city.",
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def _navi(start_module_navi: StartNavi) -> NaviServerProcess:
    return start_module_navi(canary_row=False)


@pytest.fixture
def server(_navi: NaviServerProcess) -> NaviServerProcess:
    return fresh(_navi)


def chat(server: NaviServerProcess) -> Any:
    return langchain_openai.ChatOpenAI(
        base_url=server.url + "/v1",
        api_key="no-token",
        model="navi/secretary",
        max_retries=0,
        timeout=60,
    )


def model_requests(server: NaviServerProcess) -> list[dict[str, Any]]:
    """The fake Ollama's requests of the agent's own tool loop (not the title's)."""
    return [r for r in server.llm.requests if r.get("tools")]


def test_structured_output_by_json_schema_is_parsed_and_reaches_the_model(
    server: NaviServerProcess,
) -> None:
    server.llm.script(Reply(text='{"city": "Paris", "celsius": 21.5}'))
    shaped = chat(server).with_structured_output(WEATHER, method="json_schema")
    assert shaped.invoke("The weather in Paris?") == {"city": "Paris", "celsius": 21.5}
    [request] = model_requests(server)
    assert request["format"]["required"] == ["city", "celsius"]


def test_structured_output_in_json_mode(server: NaviServerProcess) -> None:
    server.llm.script(Reply(text='{"city": "Oslo", "celsius": -3}'))
    shaped = chat(server).with_structured_output(method="json_mode")
    assert shaped.invoke("The weather in Oslo, as a JSON object.") == {
        "city": "Oslo",
        "celsius": -3,
    }
    [request] = model_requests(server)
    assert request["format"] == "json"


def test_invoke_and_stream_get_the_agents_answer(server: NaviServerProcess) -> None:
    server.llm.script(Reply(text="Bonjour."), Reply(text="Hello there, again."))
    assert chat(server).invoke("Say hello in French.").content == "Bonjour."
    pieces = [chunk.content for chunk in chat(server).stream("Say hello.")]
    assert "".join(pieces) == "Hello there, again."
    assert len(model_requests(server)) == 2


def test_an_answer_that_breaks_the_schema_is_an_error(server: NaviServerProcess) -> None:
    server.llm.script(Reply(text='{"city": "Paris"}'))
    shaped = chat(server).with_structured_output(WEATHER, method="json_schema")
    with pytest.raises(openai.APIStatusError) as caught:
        # Not the first test's question: a repeat within a short window is the same run.
        shaped.invoke("How warm is it in Paris today?")
    assert caught.value.code == "response_format_mismatch"
