"""Request bodies built from pre-encoded parts are the same bytes as those built whole."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from navi.llm import ollama_wire, openai_wire
from navi.llm.types import ChatMessage, ToolCall, ToolSpec
from navi.llm.wire_parts import IdentityCache, ListMemo, WireParts

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
    parts = WireParts(wire.encode_message, wire.encode_tool)
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


class Item:
    """An item compared by identity only, as messages are reused."""

    def __init__(self, name: str) -> None:
        self.name = name


def counting_memo(keep: int = 16) -> tuple[ListMemo[Item, str], list[str]]:
    converted: list[str] = []

    def convert(item: Item) -> str:
        converted.append(item.name)
        return item.name.upper()

    return ListMemo[Item, str](convert, keep=keep), converted


def test_a_list_memo_converts_only_what_a_list_adds_to_one_it_has_seen() -> None:
    memo, converted = counting_memo()
    a = [Item(f"a{i}") for i in range(6)]
    b = [Item(f"b{i}") for i in range(6)]
    # Two sessions' contexts, growing call after call, interleaved.
    for n in range(1, 7):
        assert memo(a[:n]) == tuple(i.name.upper() for i in a[:n])
        assert memo(b[: n - 1]) == tuple(i.name.upper() for i in b[: n - 1])
    assert converted == [
        *(f"a{i}" for i in range(1)),
        *(x for n in range(1, 6) for x in (f"a{n}", f"b{n - 1}")),
    ]
    converted.clear()
    assert memo(a) == memo(a[:]) == tuple(i.name.upper() for i in a)
    assert converted == []
    # A compression: the first messages replaced by a summary. Converted afresh.
    summary = Item("summary")
    assert memo([summary, *a[4:]]) == ("SUMMARY", "A4", "A5")
    assert converted == ["summary", "a4", "a5"]
    assert memo([]) == ()


def test_a_list_memo_keeps_a_bounded_number_of_lists() -> None:
    memo, converted = counting_memo(keep=2)
    lists = [[Item(f"{k}.{i}") for i in range(3)] for k in range(3)]
    for items in lists:
        memo(items)
    converted.clear()
    memo(lists[2] + [Item("new")])  # the newest are kept
    assert converted == ["new"]
    memo(lists[0])  # the oldest was forgotten
    assert converted == ["new", "0.0", "0.1", "0.2"]
    assert len(memo._recent) == 2


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_list_memo_always_answers_what_converting_each_item_gives(data: st.DataObject) -> None:
    memo, _ = counting_memo(keep=3)
    pool = [Item(str(i)) for i in range(8)]
    lists: list[list[Item]] = [[] for _ in range(4)]
    for _ in range(data.draw(st.integers(1, 30))):
        k = data.draw(st.integers(0, 3))
        action = data.draw(st.sampled_from(["grow", "cut", "swap"]))
        items = lists[k]
        if action == "grow":
            items.extend(data.draw(st.lists(st.sampled_from(pool), max_size=3)))
        elif action == "cut" and items:
            del items[: data.draw(st.integers(1, len(items)))]
        elif action == "swap" and items:
            items[data.draw(st.integers(0, len(items) - 1))] = data.draw(st.sampled_from(pool))
        assert memo(items) == tuple(item.name.upper() for item in items)
