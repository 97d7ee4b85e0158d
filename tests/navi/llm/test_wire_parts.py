"""Request bodies built from pre-encoded parts are the same bytes as those built whole."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from navi.llm import ollama_wire, openai_wire
from navi.llm.types import ChatMessage, ToolCall, ToolSpec
from navi.llm.wire_parts import IdentityCache, WireParts

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"

MESSAGES = [
    ChatMessage(role="system", content="You help."),
    ChatMessage(role="user", content='What is in this picture? "quoted" \u00e9', images=(PNG,)),
    ChatMessage(
        role="assistant",
        content="",
        tool_calls=(ToolCall(id="call_4_0", name="todo", arguments={"action": "read"}),),
    ),
    ChatMessage(
        role="tool", content="The todo list is empty.", tool_call_id="call_4_0", tool_name="todo"
    ),
]
TOOLS = (
    ToolSpec(
        name="todo",
        description="Your checklist.",
        parameters={"type": "object", "properties": {"action": {"type": "string"}}},
    ),
    ToolSpec(name="list_tools", description="List tools.", parameters={"type": "object"}),
)
WIRES: dict[str, tuple[Any, dict[str, Any]]] = {
    "ollama": (ollama_wire, {"model": "m", "num_ctx": 8192, "think": True, "temperature": 0.7}),
    "openai": (openai_wire, {"model": "m", "temperature": 0.7, "tool_choice": "auto"}),
}


@pytest.mark.parametrize("name", WIRES)
def test_the_same_bytes_call_after_call(name: str) -> None:
    wire, options = WIRES[name]
    parts = WireParts(wire.encode_message)
    whole = msgspec.json.encode(wire.build_chat_request(MESSAGES, TOOLS, **options))
    for grown in (MESSAGES[:2], MESSAGES, [*MESSAGES, MESSAGES[2], MESSAGES[3]]):
        expected = msgspec.json.encode(wire.build_chat_request(grown, TOOLS, **options))
        built = wire.build_chat_request(grown, TOOLS, wire=parts, **options)
        assert msgspec.json.encode(built) == expected
    assert (
        msgspec.json.encode(wire.build_chat_request(MESSAGES, TOOLS, wire=parts, **options))
        == whole
    )
    assert msgspec.json.encode(wire.build_chat_request(MESSAGES, (), wire=parts, **options)) == (
        msgspec.json.encode(wire.build_chat_request(MESSAGES, (), **options))
    )


def test_an_identity_cache_computes_once_per_object_and_stays_bounded() -> None:
    made: list[str] = []

    def make(key: list[str]) -> str:
        made.append(key[0])
        return key[0].upper()

    cache = IdentityCache[list[str], str](make, max_entries=4)
    a, b = ["a"], ["a"]  # equal, but not the same object
    assert (cache(a), cache(a), cache(b)) == ("A", "A", "A")
    assert made == ["a", "a"]
    keys = [[str(i)] for i in range(10)]
    for key in keys:
        cache(key)
    assert len(cache) <= 4
    cache(keys[-1])
    assert made.count("9") == 1  # the newest entries stay
