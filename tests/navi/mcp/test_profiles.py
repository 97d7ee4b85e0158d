"""An MCP tool is enabled for a profile by its entry's ``profiles``, not by the
profile's ``enabled_tools``; the same list is offered to the LLM and checked where
tools run (navi/run/permissions.py)."""

from __future__ import annotations

from typing import Any

from navi.accounts import Users
from navi.run import permissions
from navi.run.context_builder import ContextBuilder
from profiles import Profile, ProfileRegistry
from tools import Tool, ToolContext, ToolRegistry, ToolResult, ok


class Remote(Tool):
    uses_files = False

    def __init__(self, name: str, *, idempotent: bool = False) -> None:
        self.name = name
        self.description = "A remote tool."
        self.parameters = {"type": "object", "properties": {}}
        self.idempotent = idempotent

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ok("remote")


def _profile(pid: str, *tools: str, subagent_tools: tuple[str, ...] = ()) -> Profile:
    return Profile(
        id=pid,
        name=pid,
        system_prompt="You help.",
        enabled_tools=tools,
        subagent_tools=subagent_tools,
    )


def _setup() -> tuple[ToolRegistry, ContextBuilder]:
    registry = ToolRegistry()
    registry.set_external("mcp:home", [Remote("mcp__home__lights")], profiles=["smart_home"])
    registry.set_external("mcp:any", [Remote("mcp__any__echo", idempotent=True)])
    return registry, ContextBuilder(ProfileRegistry(()), registry)


def test_an_entrys_profiles_decide_and_enabled_tools_cannot_add() -> None:
    _, builder = _setup()
    home = _profile("smart_home")
    # Naming the tool in enabled_tools does not enable it where its entry does not.
    secretary = _profile("secretary", "mcp__home__lights")
    assert builder.tool_names(home) == ["mcp__home__lights", "mcp__any__echo"]
    assert builder.tool_names(secretary) == ["mcp__any__echo"]
    users = Users.load(api_token="", users_file="")
    why = permissions.refusal(
        builder, users, "mcp__home__lights", secretary, subagent=False, user_id="local"
    )
    assert why is not None and "not enabled in profile secretary" in why
    assert (
        permissions.refusal(
            builder, users, "mcp__home__lights", home, subagent=False, user_id="local"
        )
        is None
    )


def test_subagents_with_their_own_list_get_only_the_mcp_tools_it_names() -> None:
    _, builder = _setup()
    plain = _profile("smart_home")
    listed = _profile("smart_home", subagent_tools=("todo", "mcp__home__lights"))
    assert builder.tool_names(plain, subagent=True) == ["mcp__home__lights", "mcp__any__echo"]
    assert builder.tool_names(listed, subagent=True) == ["mcp__home__lights"]


def test_sources_are_replaced_whole_and_removed() -> None:
    registry, builder = _setup()
    home = _profile("smart_home")
    assert builder.tool_names(home)  # cached for this generation
    assert registry.source_of("mcp__any__echo") == "mcp:any"
    assert registry.is_idempotent("mcp__any__echo", {})
    registry.set_external("mcp:any", [Remote("mcp__any__other")])
    assert registry.get("mcp__any__echo") is None
    assert builder.tool_names(home) == ["mcp__home__lights", "mcp__any__other"]
    registry.remove_external("mcp:home")
    assert builder.tool_names(home) == ["mcp__any__other"]
    assert "mcp__any__other" in registry.names()


def test_an_external_tool_never_replaces_a_builtin_nor_brings_a_bad_schema() -> None:
    registry = ToolRegistry()
    registry.register_builtin(Remote("todo"))
    bad = Remote("mcp__x__bad")
    bad.parameters = {"type": "object", "properties": {"a": {"type": "strnig"}}}
    registry.set_external("mcp:x", [Remote("todo"), bad, Remote("mcp__x__good")])
    assert registry.external_names == ("mcp__x__good",)
    assert registry.source_of("todo") == "builtin"
