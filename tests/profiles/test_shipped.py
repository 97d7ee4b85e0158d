"""The profiles Navi ships: secretary, server_admin, smart_home."""

from __future__ import annotations

import pytest

from profiles import SHIPPED_DIR, Profile, ProfileRegistry

TOOL_NAMES = {
    "web_search",
    "web_view",
    "filesystem",
    "http_request",
    "code_exec",
    "terminal",
    "ssh_exec",
    "image_view",
    "todo",
    "scratchpad",
    "reload_tools",
    "write_tool",
    "list_tools",
    "tool_manual",
    "memory_search",
    "memory_remember",
    "memory_forget",
    "spawn_agent",
    "switch_profile",
}


@pytest.fixture(scope="module")
def registry() -> ProfileRegistry:
    return ProfileRegistry.load(SHIPPED_DIR, environ={})


def test_the_three_profiles_load_without_errors(registry: ProfileRegistry) -> None:
    assert registry.errors == []
    assert [p.id for p in registry] == ["secretary", "server_admin", "smart_home"]
    assert registry.default().id == "secretary"


@pytest.mark.parametrize(
    ("profile_id", "name", "temperature", "sections"),
    [
        ("secretary", "Personal Secretary", 0.7, ("findings", "sources", "drafts")),
        ("server_admin", "Server Administrator", 0.2, ("status", "logs", "errors", "plan")),
        ("smart_home", "Smart Home Assistant", 0.3, ("state", "config", "errors")),
    ],
)
def test_each_profile_matches_the_original(
    registry: ProfileRegistry,
    profile_id: str,
    name: str,
    temperature: float,
    sections: tuple[str, ...],
) -> None:
    profile = registry.get(profile_id)
    assert profile.name == name
    assert profile.temperature == temperature
    assert profile.scratchpad_sections == sections
    assert profile.planning_enabled
    assert profile.description


@pytest.mark.parametrize("profile_id", ["secretary", "server_admin", "smart_home"])
def test_tools_are_known_and_prompts_are_real(registry: ProfileRegistry, profile_id: str) -> None:
    profile: Profile = registry.get(profile_id)
    assert set(profile.enabled_tools) <= TOOL_NAMES
    assert set(profile.subagent_tools) <= set(profile.enabled_tools)
    assert {"todo", "scratchpad", "switch_profile"} <= set(profile.enabled_tools)
    # Subagents cannot spawn more subagents or switch the parent's profile.
    assert not {"spawn_agent", "switch_profile"} & set(profile.subagent_tools)
    assert len(profile.system_prompt) > 2000
    assert profile.subagent_system_prompt
    # The prompt explains every section of its scratchpad and every tool it enables.
    for section in profile.scratchpad_sections:
        assert f"*{section}*" in profile.system_prompt
    for tool in profile.enabled_tools:
        assert tool in profile.system_prompt, tool


def test_server_admin_confirms_destructive_commands(registry: ProfileRegistry) -> None:
    admin = registry.get("server_admin")
    assert "terminal" in admin.enabled_tools and "ssh_exec" in admin.enabled_tools
    assert "Confirm before anything destructive" in admin.system_prompt
    assert admin.step_validation_enabled


def test_the_persona_introduces_navi(registry: ProfileRegistry) -> None:
    prompt = registry.system_prompt_for("smart_home")
    assert prompt.startswith("You are Navi")
    assert "\n---\n# Role: Smart Home Assistant" in prompt
