"""``navi sessions`` and ``navi --version`` as a user runs them: one line when something
is wrong, never a traceback."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

from tests.navi.cli.conftest import CliWorld
from tests.navi.cli.terminal import navi_env, run_navi
from tests.support.fake_llm_script import Reply


def test_version() -> None:
    done = run_navi({}, "--version")
    assert (done.returncode, done.stdout) == (0, f"navi {version('navi')}\n")


def test_sessions_lists_what_chat_made(world: CliWorld) -> None:
    world.fake.script(Reply(text="Listed."))
    session = run_navi(world.env, "chat", "remember this chat").stderr.split()[-1]
    done = run_navi(world.env, "sessions")
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stdout.splitlines() if session in line]
    assert "   2 messages  " in line  # the question and the answer
    assert done.stderr == ""


def test_sessions_says_when_there_are_none(tmp_path: Path) -> None:
    env = navi_env(tmp_path, "http://127.0.0.1:1", 1)
    (tmp_path / "empty.db").touch()
    done = run_navi(env, "sessions", "--db", str(tmp_path / "empty.db"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("No sessions yet")


def test_sessions_with_a_bad_database_is_one_line(tmp_path: Path) -> None:
    env = navi_env(tmp_path, "http://127.0.0.1:1", 1)
    missing = tmp_path / "nowhere.db"
    for value, message in (
        (str(missing), f"navi: no database at {missing} "),
        ("mysql://x", "navi: --db: unknown database URL 'mysql://x'"),
        ("postgresql://x@127.0.0.1:1/x", "navi: cannot read the database postgresql://"),
    ):
        done = run_navi(env, "sessions", "--db", value)
        assert done.returncode != 0
        assert done.stderr.startswith(message), done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
    assert not missing.exists()  # not created by looking
