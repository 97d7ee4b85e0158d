"""``.env`` as python-dotenv reads it, under the real environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from navi.environment import environment, read_dotenv

ROOT = Path(__file__).resolve().parents[2]


def _dotenv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / ".env"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_comment_after_a_quoted_value_is_not_part_of_it(tmp_path: Path) -> None:
    path = _dotenv(tmp_path, 'NAVI_HOST="0.0.0.0" # all interfaces\nA=plain # note\n')
    assert read_dotenv(path) == {"NAVI_HOST": "0.0.0.0", "A": "plain"}


def test_a_multi_line_value_is_one_value_and_the_lines_after_it_count(tmp_path: Path) -> None:
    path = _dotenv(
        tmp_path,
        'NAVI_PERSONA="You are terse.\nYou answer in English."\nNAVI_PORT=9001\n',
    )
    assert read_dotenv(path) == {
        "NAVI_PERSONA": "You are terse.\nYou answer in English.",
        "NAVI_PORT": "9001",
    }


def test_the_usual_forms(tmp_path: Path) -> None:
    path = _dotenv(
        tmp_path,
        "# a comment\n"
        "export A=1\n"
        "B='single # not a comment'\n"
        'C="escaped\\nnewline"\n'
        "D=\n"
        "JUST_A_NAME\n"
        "E=${A}-x\n",
    )
    assert read_dotenv(path) == {
        "A": "1",
        "B": "single # not a comment",
        "C": "escaped\nnewline",
        "D": "",
        "E": "1-x",
    }


def test_the_real_environment_wins_even_when_empty(tmp_path: Path) -> None:
    path = _dotenv(tmp_path, "A=from-file\nB=from-file\n")
    env = environment(path, base={"A": "from-env", "B": ""})
    assert env["A"] == "from-env" and env["B"] == ""


def test_no_file_is_no_variables(tmp_path: Path) -> None:
    assert read_dotenv(tmp_path / ".env") == {}
    assert environment(tmp_path / ".env", base={"X": "1"}) == {"X": "1"}


def test_navi_reads_the_env_file_of_the_folder_it_starts_in(tmp_path: Path) -> None:
    """A real command: the file with a multi-line value (which stopped every command
    before) and a commented quoted value, in the current folder."""
    _dotenv(
        tmp_path,
        'NAVI_PERSONA="line one\nline two"\nNAVI_DATABASE_URL="sqlite:///from-dotenv.db" # here\n',
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NAVI_", "OLLAMA_"))}
    env["PYTHONPATH"] = str(ROOT)
    code = (
        "from navi.cli.common import settings_for; import argparse;"
        "s, env = settings_for(argparse.Namespace());"
        "print(s.database_url); print(repr(env['NAVI_PERSONA']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["sqlite:///from-dotenv.db", "'line one\\nline two'"]


def test_a_line_that_cannot_be_read_is_skipped_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _dotenv(tmp_path, "A=1\nthis is not a variable\nB=2\n")
    assert read_dotenv(path) == {"A": "1", "B": "2"}
    assert "line 2" in caplog.text
