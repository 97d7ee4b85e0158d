from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from profiles import ProfileError, ProfileRegistry, UnknownProfile, load_profile, profile_hash
from tests.profiles.support import write_profile

NO_ENV: dict[str, str] = {}


def problems(registry: ProfileRegistry) -> dict[str, str]:
    return {f"{e.path.parent.name}/{e.path.name}": e.problem for e in registry.errors}


def test_every_valid_folder_loads(tmp_path: Path) -> None:
    write_profile(tmp_path, "secretary", config={"enabled_tools": ["todo"]})
    write_profile(tmp_path, "other", prompt="  Be brief.\n\n")
    registry = ProfileRegistry.load(tmp_path, environ=NO_ENV)
    assert registry.errors == []
    assert [p.id for p in registry] == ["other", "secretary"]
    assert len(registry) == 2
    assert "other" in registry
    assert registry.get("other").system_prompt == "Be brief."
    assert registry.get("secretary").enabled_tools == ("todo",)
    assert registry.source_of("other") == tmp_path / "other"


@pytest.mark.parametrize(
    ("folder", "file", "problem"),
    [
        ("badjson", "config.json", "invalid JSON: Input data was truncated"),
        ("wrongtype", "config.json", "Expected `float`, got `str` - at `$.temperature`"),
        ("unknownfield", "config.json", "Object contains unknown field `colour`"),
        ("inlineprompt", "config.json", "system_prompt belongs in system_prompt.txt"),
        ("noprompt", "system_prompt.txt", "missing system_prompt.txt"),
        ("emptyprompt", "system_prompt.txt", "system_prompt.txt is empty"),
        ("wrongid", "config.json", "id 'elsewhere' does not match its folder name 'wrongid'"),
        ("twice", "config.json", "enabled_tools lists todo twice"),
        ("noconfig", "config.json", "missing config.json"),
        ("binaryprompt", "system_prompt.txt", "not UTF-8 text"),
    ],
)
def test_a_malformed_profile_is_reported_and_the_others_still_load(
    tmp_path: Path, folder: str, file: str, problem: str
) -> None:
    write_profile(tmp_path, "secretary")
    write_profile(tmp_path, "zeta")
    match folder:
        case "badjson":
            write_profile(tmp_path, folder, raw_config='{"id": "badjson", "name": ')
        case "wrongtype":
            write_profile(tmp_path, folder, config={"temperature": "hot"})
        case "unknownfield":
            write_profile(tmp_path, folder, config={"colour": "red"})
        case "inlineprompt":
            write_profile(tmp_path, folder, config={"system_prompt": "inline"})
        case "noprompt":
            write_profile(tmp_path, folder, prompt=None)
        case "emptyprompt":
            write_profile(tmp_path, folder, prompt=" \n ")
        case "wrongid":
            write_profile(tmp_path, folder, config={"id": "elsewhere"})
        case "twice":
            write_profile(tmp_path, folder, config={"enabled_tools": ["todo", "todo"]})
        case "noconfig":
            (tmp_path / folder).mkdir()
        case "binaryprompt":
            write_profile(tmp_path, folder).joinpath("system_prompt.txt").write_bytes(b"\xff\xfe")
    with capture_logs() as logs:
        registry = ProfileRegistry.load(tmp_path, environ=NO_ENV)
    assert [p.id for p in registry] == ["secretary", "zeta"]
    [error] = registry.errors
    assert error.path == tmp_path / folder / file
    assert problem in error.problem
    assert str(tmp_path / folder / file) in str(error)
    warnings = [entry for entry in logs if entry["event"] == "profile.invalid"]
    assert warnings == [
        {
            "event": "profile.invalid",
            "log_level": "warning",
            "path": str(error.path),
            "problem": error.problem,
        }
    ]


def test_load_profile_raises_for_one_bad_folder(tmp_path: Path) -> None:
    folder = write_profile(tmp_path, "p", config={"max_iterations": -1})
    with pytest.raises(ProfileError, match=r"config.json: Expected `int` >= 1"):
        load_profile(folder)


def test_private_folders_and_stray_files_are_ignored(tmp_path: Path) -> None:
    write_profile(tmp_path, "secretary")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / ".git").mkdir()
    write_profile(tmp_path, "_draft", raw_config="not json")
    (tmp_path / "notes.txt").write_text("hello")
    registry = ProfileRegistry.load(tmp_path, environ=NO_ENV)
    assert registry.errors == []
    assert [p.id for p in registry] == ["secretary"]


def test_unknown_profiles_raise_a_clear_error(tmp_path: Path) -> None:
    write_profile(tmp_path, "secretary")
    write_profile(tmp_path, "b")
    registry = ProfileRegistry.load(tmp_path, environ=NO_ENV)
    with pytest.raises(UnknownProfile) as info:
        registry.get("nope")
    assert str(info.value) == "unknown profile 'nope' (available: b, secretary)"
    assert isinstance(info.value, LookupError)
    assert info.value.profile_id == "nope"


def test_the_default_profile_comes_from_the_environment(tmp_path: Path) -> None:
    write_profile(tmp_path, "secretary")
    write_profile(tmp_path, "b")
    assert ProfileRegistry.load(tmp_path, environ=NO_ENV).default().id == "secretary"
    registry = ProfileRegistry.load(tmp_path, environ={"NAVI_DEFAULT_PROFILE": "b"})
    assert registry.default_id == "b"
    assert registry.default().id == "b"


def test_a_missing_default_profile_is_reported(tmp_path: Path) -> None:
    write_profile(tmp_path, "b")
    registry = ProfileRegistry.load(tmp_path, environ={"NAVI_DEFAULT_PROFILE": "ghost"})
    assert [e.problem for e in registry.errors] == [
        "the NAVI_DEFAULT_PROFILE profile 'ghost' is not loaded"
    ]
    with pytest.raises(UnknownProfile, match="unknown profile 'ghost'"):
        registry.default()


def test_a_missing_directory_is_reported(tmp_path: Path) -> None:
    write_profile(tmp_path, "secretary")
    registry = ProfileRegistry.load(tmp_path, user_directory=tmp_path / "absent", environ=NO_ENV)
    assert [e.problem for e in registry.errors] == ["profiles directory does not exist"]
    assert [p.id for p in registry] == ["secretary"]


def test_the_user_directory_adds_and_overrides(tmp_path: Path) -> None:
    shipped, user = tmp_path / "shipped", tmp_path / "user"
    write_profile(shipped, "secretary", prompt="shipped secretary")
    write_profile(shipped, "server_admin", prompt="shipped admin")
    write_profile(user, "secretary", prompt="my secretary")
    write_profile(user, "cook", prompt="my cook")
    registry = ProfileRegistry.load(shipped, user_directory=user, environ=NO_ENV)
    assert registry.errors == []
    assert [p.id for p in registry] == ["cook", "secretary", "server_admin"]
    assert registry.get("secretary").system_prompt == "my secretary"
    assert registry.source_of("secretary") == user / "secretary"
    assert registry.get("server_admin").system_prompt == "shipped admin"


def test_a_broken_override_leaves_the_shipped_profile(tmp_path: Path) -> None:
    shipped, user = tmp_path / "shipped", tmp_path / "user"
    write_profile(shipped, "secretary", prompt="shipped")
    write_profile(user, "secretary", config={"temperature": "warm"})
    registry = ProfileRegistry.load(shipped, user_directory=user, environ=NO_ENV)
    assert registry.get("secretary").system_prompt == "shipped"
    assert [e.path for e in registry.errors] == [user / "secretary" / "config.json"]


def test_from_environ_reads_profiles_dir(tmp_path: Path) -> None:
    write_profile(tmp_path, "cook")
    registry = ProfileRegistry.from_environ({"PROFILES_DIR": str(tmp_path)})
    assert {"cook", "secretary", "server_admin", "smart_home"} <= {p.id for p in registry}
    assert registry.errors == []


def test_reload_picks_up_changes_and_new_folders(tmp_path: Path) -> None:
    write_profile(tmp_path, "secretary", prompt="v1")
    registry = ProfileRegistry.load(tmp_path, environ=NO_ENV)
    before = registry.get("secretary")
    write_profile(tmp_path, "secretary", prompt="v2")
    write_profile(tmp_path, "new")
    registry.reload()
    after = registry.get("secretary")
    assert after.system_prompt == "v2"
    assert profile_hash(after) != profile_hash(before)
    assert "new" in registry


def test_reload_keeps_the_last_good_version_of_a_broken_profile(tmp_path: Path) -> None:
    write_profile(tmp_path, "secretary", prompt="good")
    registry = ProfileRegistry.load(tmp_path, environ=NO_ENV)
    write_profile(tmp_path, "secretary", raw_config="{ half saved")
    registry.reload()
    assert registry.get("secretary").system_prompt == "good"
    [error] = registry.errors
    assert error.problem.endswith("(kept the previously loaded version)")
    assert error.path == tmp_path / "secretary" / "config.json"
    # Fixed again: the error goes away.
    write_profile(tmp_path, "secretary", prompt="better")
    registry.reload()
    assert registry.errors == []
    assert registry.get("secretary").system_prompt == "better"


def test_reload_drops_a_removed_folder(tmp_path: Path) -> None:
    write_profile(tmp_path, "secretary")
    gone = write_profile(tmp_path, "gone")
    registry = ProfileRegistry.load(tmp_path, environ=NO_ENV)
    for file in gone.iterdir():
        file.unlink()
    gone.rmdir()
    registry.reload()
    assert "gone" not in registry
    assert registry.errors == []
