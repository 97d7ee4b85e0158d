"""One data folder: NAVI_DATA_DIR, else the platform's user data folder; each setting
of its own still wins; an older install's ./navi.db is used and reported; ``--db``
takes a plain file path; ``navi doctor`` creates nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from events.factory import store_for_url
from navi.config import Settings
from navi.data_dir import database_url
from tests.support.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No NAVI_DATA_DIR, a fake home, and a current folder without an older install."""
    monkeypatch.delenv("NAVI_DATA_DIR", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path


def test_everything_defaults_into_the_user_data_folder(no_data_dir: Path) -> None:
    data = no_data_dir / "home" / ".local" / "share" / "navi"
    settings = Settings.from_env({})
    assert settings.data_dir == str(data)
    assert settings.database_url == f"sqlite:///{data / 'navi.db'}"
    assert settings.files_root == data / "session_files"
    assert settings.tools.tools_path == data / "user_tools"
    assert settings.blobs_root == data / "blobs"
    assert settings.mcp_config_path == data / "mcp.json"
    assert settings.users_file == ""  # no users file there: open on loopback, as before
    assert settings.data_notes == ()
    assert not data.exists()  # reading the settings makes nothing


def test_xdg_data_home_and_navi_data_dir_move_it(
    no_data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(no_data_dir / "xdg"))
    assert Settings.from_env({}).data_dir == str(no_data_dir / "xdg" / "navi")
    named = Settings.from_env({"NAVI_DATA_DIR": "~/navi-data"})
    assert named.data_dir == str(no_data_dir / "home" / "navi-data")
    assert named.database_url == f"sqlite:///{no_data_dir / 'home' / 'navi-data' / 'navi.db'}"


def test_a_users_file_in_the_data_folder_is_read(tmp_path: Path) -> None:
    (tmp_path / "users.json").write_text("[]")
    assert Settings.from_env({"NAVI_DATA_DIR": str(tmp_path)}).users_file == str(
        tmp_path / "users.json"
    )


def test_each_setting_of_its_own_wins(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "NAVI_DATA_DIR": str(tmp_path / "data"),
            "NAVI_DATABASE_URL": "postgresql://navi@127.0.0.1/navi",
            "SESSION_FILES_DIR": "/srv/files",
            "TOOLS_DIR": "/srv/tools",
            "NAVI_BLOBS_DIR": "/srv/blobs",
            "NAVI_USERS_FILE": "/etc/navi/users.json",
            "NAVI_MCP_CONFIG": "/etc/navi/mcp.json",
        }
    )
    assert settings.database_url == "postgresql://navi@127.0.0.1/navi"
    assert settings.files_root == Path("/srv/files")
    assert settings.tools.tools_path == Path("/srv/tools")
    assert settings.blobs_root == Path("/srv/blobs")
    assert settings.users_file == "/etc/navi/users.json"
    assert settings.mcp_config_path == Path("/etc/navi/mcp.json")
    # PostgreSQL without NAVI_BLOBS_DIR: the images go to the data folder.
    postgres = Settings.from_env(
        {"NAVI_DATA_DIR": str(tmp_path), "NAVI_DATABASE_URL": "postgresql://h/db"}
    )
    assert postgres.blobs_root == tmp_path / "blobs"
    # DB_PATH, the older name, still names the SQLite file.
    assert Settings.from_env({"DB_PATH": "/srv/x.db"}).database_url == "sqlite:////srv/x.db"


def test_an_older_installs_navi_db_is_used_and_reported(no_data_dir: Path) -> None:
    here = no_data_dir / "cwd"
    (here / "navi.db").write_bytes(b"")
    (here / "session_files").mkdir()
    data = no_data_dir / "home" / ".local" / "share" / "navi"
    settings = Settings.from_env({})
    assert settings.database_url == f"sqlite:///{here / 'navi.db'}"
    assert settings.files_root == here / "session_files"
    assert settings.blobs_root == here / "blobs"  # beside the database, as before
    assert settings.tools.tools_path == data / "user_tools"  # there was no ./user_tools
    assert settings.data_dir == str(data)
    note = settings.data_notes[0]
    assert note.startswith("using ./navi.db from an older install") and str(data) in note
    # Named explicitly, the database is what it names, and nothing is said.
    named = Settings.from_env({"NAVI_DATABASE_URL": f"sqlite:///{no_data_dir / 'x.db'}"})
    assert named.data_notes == () and named.files_root == data / "session_files"


def test_db_takes_a_plain_path_or_a_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert database_url("x.db") == f"sqlite:///{tmp_path / 'x.db'}"
    assert database_url("sub/x.db") == f"sqlite:///{tmp_path / 'sub' / 'x.db'}"
    assert database_url("sqlite:///y.db") == "sqlite:///y.db"
    assert database_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert database_url("memory://") == "memory://"
    for bad in ("mysql://h/db", "sqlite://x.db", "sqlite:///", str(tmp_path)):
        with pytest.raises(ValueError):
            database_url(bad)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NAVI_", "OLLAMA_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        HOME=str(tmp_path / "home"),
        NAVI_DATA_DIR=str(tmp_path / "data"),
        OLLAMA_HOST="http://127.0.0.1:1",
        NAVI_LLM_BACKEND="ollama",
        LOG_LEVEL="INFO",
    )
    env.pop("XDG_DATA_HOME", None)
    env.update(extra)
    return env


def test_navi_serve_db_with_a_plain_path_answers_and_makes_the_file(tmp_path: Path) -> None:
    port = free_port()
    here = tmp_path / "cwd"
    here.mkdir()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "navi.cli", "serve", "--db", "x.db", "--port", str(port)],
            cwd=here,
            env=_env(tmp_path),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, log.read_text()
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert (here / "x.db").is_file()
    text = log.read_text()
    assert str(tmp_path / "data") in text  # the start-up log names the data folder
    assert (tmp_path / "data").is_dir()
    assert not (tmp_path / "data" / "navi.db").exists()
    # A new data folder's user tools start with the examples of the source tree.
    assert (tmp_path / "data" / "user_tools" / "get_current_datetime.py").is_file()


@pytest.mark.parametrize("bad", ["mysql://h/db", "sqlite://x.db"])
def test_a_bad_db_is_one_line_not_a_traceback(tmp_path: Path, bad: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "navi.cli", "serve", "--db", bad],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("navi: --db: ") and done.stderr.count("\n") == 1, done.stderr


def _doctor(tmp_path: Path, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "navi.cli", "doctor"],
        cwd=cwd,
        env=_env(tmp_path, TOOLS_DIR=str(tmp_path / "tools")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout


def test_doctor_names_the_data_folder_and_creates_no_database(tmp_path: Path) -> None:
    here = tmp_path / "cwd"
    here.mkdir()
    out = _doctor(tmp_path, here)
    data = tmp_path / "data"
    assert f"data folder: {data} (navi serve makes it)" in out
    assert f"database sqlite:///{data / 'navi.db'}: none yet" in out
    assert not data.exists()
    assert list(here.iterdir()) == []


async def test_doctor_reports_an_older_installs_navi_db(tmp_path: Path) -> None:
    here = tmp_path / "cwd"
    async with store_for_url(f"sqlite:///{here / 'navi.db'}"):
        pass
    out = _doctor(tmp_path, here)
    assert "! note: using ./navi.db from an older install" in out
    assert f"database sqlite:///{here / 'navi.db'}: 0 streams" in out
    assert not (tmp_path / "data").exists()


def test_navi_users_add_writes_the_data_folders_users_file(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "navi.cli", "users", "add", "bob"],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    users = tmp_path / "data" / "users.json"
    assert users.is_file() and done.stdout.strip() not in users.read_text()
    # A server started now reads it: tokens are needed even on loopback.
    assert Settings.from_env({"NAVI_DATA_DIR": str(tmp_path / "data")}).users_file == str(users)
