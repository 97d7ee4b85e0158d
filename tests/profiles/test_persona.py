from __future__ import annotations

from pathlib import Path

import pytest

from profiles import SHIPPED_PERSONA, ProfileError, ProfileRegistry, persona
from tests.profiles.support import write_profile


def test_the_shipped_persona_is_the_default() -> None:
    text = persona({})
    assert text == SHIPPED_PERSONA.read_text(encoding="utf-8").strip()
    assert "Navi" in text


def test_inline_persona_wins_and_understands_escaped_newlines(tmp_path: Path) -> None:
    file = tmp_path / "p.txt"
    file.write_text("from file")
    env = {"NAVI_PERSONA": "You are Max.\\nBe terse.", "NAVI_PERSONA_FILE": str(file)}
    assert persona(env) == "You are Max.\nBe terse."


def test_the_persona_file_comes_next(tmp_path: Path) -> None:
    file = tmp_path / "p.txt"
    file.write_text("  You are Max.\nBe terse.\n\n", encoding="utf-8")
    assert persona({"NAVI_PERSONA": "   ", "NAVI_PERSONA_FILE": str(file)}) == (
        "You are Max.\nBe terse."
    )


@pytest.mark.parametrize(
    ("setup", "problem"),
    [
        ("missing", "NAVI_PERSONA_FILE does not exist"),
        ("directory", "NAVI_PERSONA_FILE is a directory"),
        ("binary", "NAVI_PERSONA_FILE is not UTF-8 text"),
    ],
)
def test_a_bad_persona_file_is_a_clear_error(tmp_path: Path, setup: str, problem: str) -> None:
    path = tmp_path / "persona.txt"
    if setup == "directory":
        path.mkdir()
    elif setup == "binary":
        path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ProfileError) as info:
        persona({"NAVI_PERSONA_FILE": str(path)})
    assert info.value.path == path
    assert problem in info.value.problem


def test_the_registry_reports_a_bad_persona_and_falls_back(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    write_profile(profiles, "secretary", prompt="Do secretary things.")
    (profiles / "persona.txt").write_text("Default persona.")
    registry = ProfileRegistry.load(
        profiles, environ={"NAVI_PERSONA_FILE": str(tmp_path / "typo.txt")}
    )
    assert [e.path for e in registry.errors] == [tmp_path / "typo.txt"]
    assert registry.persona == "Default persona."


def test_system_prompt_is_persona_separator_profile(tmp_path: Path) -> None:
    write_profile(tmp_path, "secretary", prompt="Do secretary things.")
    registry = ProfileRegistry.load(tmp_path, environ={"NAVI_PERSONA": "I am Navi."})
    assert registry.system_prompt_for("secretary") == "I am Navi.\n---\nDo secretary things."
    profile = registry.get("secretary")
    assert registry.system_prompt_for(profile) is registry.system_prompt_for("secretary")


def test_subagent_prompt_uses_the_subagent_system_prompt(tmp_path: Path) -> None:
    write_profile(tmp_path, "secretary", config={"subagent_system_prompt": "Be a helper."})
    registry = ProfileRegistry.load(tmp_path, environ={"NAVI_PERSONA": "I am Navi."})
    assert registry.subagent_prompt_for("secretary") == "I am Navi.\n---\nBe a helper."


def test_an_empty_persona_leaves_the_profile_prompt_alone(tmp_path: Path) -> None:
    write_profile(tmp_path, "secretary", prompt="Only this.")
    (tmp_path / "persona.txt").write_text("")
    registry = ProfileRegistry.load(tmp_path, environ={})
    assert registry.errors == []
    assert registry.system_prompt_for("secretary") == "Only this."


def test_reload_invalidates_the_cached_prompts(tmp_path: Path) -> None:
    write_profile(tmp_path, "secretary", prompt="v1")
    persona_file = tmp_path / "persona.txt"
    persona_file.write_text("Persona one.")
    registry = ProfileRegistry.load(tmp_path, environ={})
    assert registry.system_prompt_for("secretary") == "Persona one.\n---\nv1"
    persona_file.write_text("Persona two.")
    write_profile(tmp_path, "secretary", prompt="v2")
    assert registry.system_prompt_for("secretary") == "Persona one.\n---\nv1"  # cached
    registry.reload()
    assert registry.system_prompt_for("secretary") == "Persona two.\n---\nv2"
