"""A caller's ``stop`` and JSON answer (``LLMOptions.stop``, ``json_format``) on each
backend's wire: Ollama's ``options.stop`` and ``format``, OpenAI's ``stop`` and
``response_format``, llama-cpp-python's ``stop`` and ``response_format`` (a grammar)."""

from __future__ import annotations

from navi.llm import embedded, ollama_wire, openai_wire
from navi.llm.types import ChatMessage, JSONFormat, LLMOptions

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
ASK = [ChatMessage(role="user", content="JSON please")]


def test_json_format_of_openais_response_format() -> None:
    assert JSONFormat.of(None) is None
    assert JSONFormat.of({"type": "text"}) is None
    assert JSONFormat.of({"type": "json_object"}) == JSONFormat()
    spec = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA, "strict": True}}
    assert JSONFormat.of(spec) == JSONFormat(schema=SCHEMA, name="a", strict=True)


def test_ollama_gets_format_and_stop() -> None:
    plain = ollama_wire.build_chat_request(ASK, (), model="m", num_ctx=2048, think=None)
    assert "format" not in plain and "stop" not in plain["options"]
    body = ollama_wire.build_chat_request(
        ASK, (), model="m", num_ctx=2048, think=None, stop=["END"], json_format=JSONFormat()
    )
    assert body["format"] == "json" and body["options"]["stop"] == ["END"]
    schema = ollama_wire.build_chat_request(
        ASK, (), model="m", num_ctx=2048, think=None, json_format=JSONFormat(schema=SCHEMA)
    )
    assert schema["format"] == SCHEMA


def test_an_openai_compatible_server_gets_response_format_and_stop() -> None:
    plain = openai_wire.build_chat_request(ASK, (), model="m")
    assert "response_format" not in plain and "stop" not in plain
    body = openai_wire.build_chat_request(
        ASK, (), model="m", stop=["END"], json_format=JSONFormat(schema=SCHEMA, name="x")
    )
    assert body["stop"] == ["END"]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "x", "schema": SCHEMA},
    }
    obj = openai_wire.build_chat_request(ASK, (), model="m", json_format=JSONFormat())
    assert obj["response_format"] == {"type": "json_object"}


def test_the_embedded_model_gets_a_json_grammar_and_stop() -> None:
    options = LLMOptions(stop=("END",), json_format=JSONFormat(schema=SCHEMA))
    request = embedded._build_request(ASK, (), options, 256)
    assert request.stop == ["END"]
    assert request.response_format == {"type": "json_object", "schema": SCHEMA}
    assert embedded._build_request(ASK, (), LLMOptions(), 256).response_format is None
