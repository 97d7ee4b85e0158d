"""``memory_search``, ``memory_remember`` and ``memory_forget`` through the tool registry,
as a run calls them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from events.in_memory import InMemoryEventStore
from events.types import LLMCompleted, UserMessage
from navi.memory.facts import fact_id, memory_stream_id
from navi.memory.service import MemoryService
from navi.memory.tools import USAGE_RULES, memory_tools
from tests.navi.memory.conftest import learned
from tools.context import ToolContext
from tools.registry import ToolRegistry

pytestmark = pytest.mark.anyio

EDITOR = fact_id("preference", "editor")


@pytest.fixture
async def service() -> AsyncIterator[MemoryService]:
    async with InMemoryEventStore() as store:
        await store.append(
            memory_stream_id("local"),
            [
                learned("preference", "editor", "Uses Neovim"),
                learned("environment", "os", "Arch Linux"),
                learned("project", "os", "Writes a toy OS kernel"),
            ],
            expected_seq=0,
        )
        yield MemoryService(store)


@pytest.fixture
def registry(service: MemoryService) -> ToolRegistry:
    registry = ToolRegistry()
    for tool in memory_tools(service):
        registry.register_builtin(tool)
    return registry


def ctx(tmp_path: Path, user_id: str = "local") -> ToolContext:
    return ToolContext.standalone("s9", tmp_path, user_id=user_id)


async def test_the_descriptions_carry_the_usage_rules(registry: ToolRegistry) -> None:
    for name in ("memory_search", "memory_remember", "memory_forget"):
        tool = registry.get(name)
        assert tool is not None and USAGE_RULES in tool.description
    assert "Do not call at session start reflexively" in USAGE_RULES
    assert "Call memory_remember and memory_forget only when the user explicitly" in USAGE_RULES


async def test_search_finds_ranked_facts(registry: ToolRegistry, tmp_path: Path) -> None:
    result = await registry.execute("memory_search", {"query": "neovim editor"}, ctx(tmp_path))
    assert result.success
    assert result.output.splitlines() == [
        "1 remembered fact(s) for 'neovim editor':",
        f"- [preference] editor: Uses Neovim (id {EDITOR})",
    ]
    none = await registry.execute("memory_search", {"query": "kubernetes"}, ctx(tmp_path))
    assert none.success and none.output == "No remembered fact matches 'kubernetes'."
    other_user = await registry.execute("memory_search", {"query": "neovim"}, ctx(tmp_path, "bob"))
    assert "No remembered fact" in other_user.output


async def test_bad_arguments_get_a_clear_error(registry: ToolRegistry, tmp_path: Path) -> None:
    result = await registry.execute("memory_search", {"query": ""}, ctx(tmp_path))
    assert not result.success and "query" in result.output
    result = await registry.execute("memory_forget", {}, ctx(tmp_path))
    assert not result.success and "fact_id" in result.output


async def test_forget_by_id_or_key(
    registry: ToolRegistry, service: MemoryService, tmp_path: Path
) -> None:
    result = await registry.execute("memory_forget", {"fact_id": EDITOR}, ctx(tmp_path))
    assert result.success and "Forgot the fact [preference] editor" in result.output
    assert "Neovim" not in result.output  # the forgotten value is not repeated
    assert await service.search("local", "neovim") == []
    again = await registry.execute("memory_forget", {"fact_id": EDITOR}, ctx(tmp_path))
    assert not again.success and "was forgotten" in again.output

    ambiguous = await registry.execute("memory_forget", {"key": "OS"}, ctx(tmp_path))
    assert not ambiguous.success and "several facts" in ambiguous.output
    one = await registry.execute(
        "memory_forget", {"key": "os", "category": "project"}, ctx(tmp_path)
    )
    assert one.success
    assert [f.value for f in await service.facts()] == ["Arch Linux"]
    missing = await registry.execute("memory_forget", {"key": "pet"}, ctx(tmp_path))
    assert not missing.success and "no remembered fact has the key 'pet'" in missing.output


async def test_remember_writes_a_fact_the_user_told_with_its_message_as_source(
    registry: ToolRegistry, service: MemoryService, tmp_path: Path
) -> None:
    store = service.store
    await store.append(
        "s9",
        [UserMessage(text="Remember that I use metric units."), LLMCompleted(content="Sure.")],
        expected_seq=0,
    )
    told = {"category": "preference", "key": "Units", "value": "  Prefers metric units "}
    result = await registry.execute("memory_remember", told, ctx(tmp_path))
    assert result.success and "Remembered [preference] units: Prefers metric units" in result.output
    [fact] = [f for f in await service.facts() if f.key == "units"]
    assert fact.value == "Prefers metric units" and fact.model == "memory_remember"
    assert fact.source is not None and (fact.source.session_id, fact.source.seqs) == ("s9", (1,))
    [source] = await service.sources("local", fact)
    assert source.content == "Remember that I use metric units."
    assert [f.value for f in await service.search("local", "metric")] == ["Prefers metric units"]
    # Told again, the same: nothing new; a new value replaces the old one.
    again = await registry.execute("memory_remember", told, ctx(tmp_path))
    assert again.success
    changed = {**told, "value": "Prefers imperial units"}
    await registry.execute("memory_remember", changed, ctx(tmp_path))
    assert [f.value for f in await service.facts() if f.key == "units"] == [
        "Prefers imperial units"
    ]
    state = await service.state("local")
    assert len(state.facts[fact.fact_id].history) == 2
    # Another user's memory is untouched.
    assert await service.facts("bob") == []


async def test_remember_refuses_what_is_not_a_fact(
    registry: ToolRegistry, service: MemoryService, tmp_path: Path
) -> None:
    before = await service.facts()
    for args in (
        {"category": "preference", "key": "!!!", "value": "x"},
        {"category": "preference", "key": "units", "value": "   "},
        {"category": "secrets", "key": "units", "value": "x"},
        {"category": "preference", "key": "units", "value": "x" * 2001},
        {"category": "preference", "key": "units"},
    ):
        result = await registry.execute("memory_remember", args, ctx(tmp_path))
        assert not result.success, args
    assert await service.facts() == before


async def test_remember_and_forget_ask_first_by_default(registry: ToolRegistry) -> None:
    for name in ("memory_remember", "memory_forget"):
        tool = registry.get(name)
        assert tool is not None and tool.approval == "ask"
