from __future__ import annotations

import msgspec
import pytest

from profiles import Profile, ProfileConfig, profile_hash


def test_defaults_follow_the_original_agent_profile() -> None:
    profile = Profile(id="p", name="P", system_prompt="hi")
    assert profile.max_iterations == 50
    assert profile.llm_backend is None
    assert profile.model is None
    assert profile.num_ctx is None
    assert (profile.think_enabled, profile.iteration_budget_enabled) == (True, True)
    assert (profile.goal_anchoring_enabled, profile.goal_anchoring_interval) == (True, 5)
    assert (profile.anti_stall_enabled, profile.anti_stall_threshold) == (True, 8)
    assert not profile.planning_enabled
    assert not profile.planning_phase2_enabled
    assert not profile.subagent_planning_enabled
    assert not profile.step_validation_enabled
    assert not profile.adaptive_replan_enabled


def test_subagents_fall_back_to_the_profile_tools_and_prompt() -> None:
    profile = Profile(id="p", name="P", system_prompt="main", enabled_tools=("todo",))
    assert profile.subagent_tool_names == ("todo",)
    assert profile.subagent_prompt == "main"
    special = msgspec.structs.replace(
        profile, subagent_tools=("web_search",), subagent_system_prompt="sub"
    )
    assert special.subagent_tool_names == ("web_search",)
    assert special.subagent_prompt == "sub"


def test_profiles_are_frozen() -> None:
    profile = Profile(id="p", name="P", system_prompt="hi")
    with pytest.raises(AttributeError):
        profile.name = "Q"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("json_text", "message"),
    [
        (b'{"id": "p", "name": "P", "temperature": "hot"}', "Expected `float`, got `str`"),
        (b'{"id": "p", "name": "P", "temperature": 3}', "Expected `float` <= 2.0"),
        (b'{"id": "p", "name": "P", "max_iterations": 0}', "Expected `int` >= 1"),
        (b'{"id": "p", "name": "P", "enabled_tools": ["rm -rf"]}', "enabled_tools[0]"),
        (b'{"id": "p", "name": "P", "colour": "red"}', "unknown field `colour`"),
        (b'{"id": "P Q", "name": "P"}', "$.id"),
        (b'{"name": "P"}', "missing required field `id`"),
    ],
)
def test_bad_config_values_are_refused(json_text: bytes, message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.json.decode(json_text, type=ProfileConfig)
    assert message in str(info.value)


def test_the_hash_is_stable_and_sensitive() -> None:
    base = Profile(id="p", name="P", system_prompt="hi", enabled_tools=("todo",))
    digest = profile_hash(base)
    assert len(digest) == 16
    assert profile_hash(Profile(id="p", name="P", system_prompt="hi", enabled_tools=("todo",))) == (
        digest
    )
    # Spelling out a default changes nothing; a real change does.
    assert profile_hash(msgspec.structs.replace(base, max_iterations=50)) == digest
    assert profile_hash(msgspec.structs.replace(base, max_iterations=51)) != digest
    assert profile_hash(msgspec.structs.replace(base, system_prompt="hi!")) != digest
    assert profile_hash(msgspec.structs.replace(base, enabled_tools=())) != digest


def test_the_hash_of_a_known_profile_never_changes() -> None:
    # Recorded in run.started: if this fails, old logs no longer match their profile.
    profile = Profile(
        id="p", name="P", system_prompt="hi", temperature=0.2, enabled_tools=("todo",)
    )
    assert profile_hash(profile) == "f213feaaa7e6ba92"
