"""``navi serve``'s start-up: what it does once the server is open."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from navi.server.app import create_app
from tests.support.fake_llm import FakeLLMServer
from tests.support.navi_app import navi_settings

pytestmark = pytest.mark.anyio


async def test_on_started_runs_once_the_server_is_open(tmp_path: Path) -> None:
    calls: list[bool] = []
    async with FakeLLMServer() as fake:
        settings = navi_settings(tmp_path, fake.url, planning="off")
        app = create_app(
            settings, env={}, on_started=lambda: calls.append(hasattr(app.state, "navi_server"))
        )
        async with app.router.lifespan_context(app):
            assert calls == [True]
    assert calls == [True]


def test_start_up_objects_are_frozen_out_of_the_collectors_reach() -> None:
    # In a process of its own: freezing is for the server's whole life.
    code = (
        "import gc\n"
        "from navi.cli import freeze_startup_objects\n"
        "assert gc.get_freeze_count() == 0\n"
        "freeze_startup_objects()\n"
        "assert gc.get_freeze_count() > 10_000, gc.get_freeze_count()\n"
        "assert gc.get_count()[0] < 10\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_doctor_warns_when_private_urls_are_open(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "NAVI_DATABASE_URL": f"sqlite:///{tmp_path / 'navi.db'}",
        "OLLAMA_HOST": "http://127.0.0.1:1",
        "TOOLS_DIR": str(tmp_path / "tools"),
        "HOME": str(tmp_path),
    }

    def doctor(**extra: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "navi.cli", "doctor"],
            env={**env, **extra},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.stdout

    assert "NAVI_ALLOW_PRIVATE_URLS" not in doctor()
    assert "! warning: NAVI_ALLOW_PRIVATE_URLS=1" in doctor(NAVI_ALLOW_PRIVATE_URLS="1")


def test_doctor_reads_the_connection_saved_in_settings(tmp_path: Path) -> None:
    import anyio

    from events.factory import store_for_url
    from events.settings_events import SettingsUpdated
    from navi.llm.connection import KeyFile, mask_key
    from navi.user_settings import SERVER, SettingsService
    from tests.support.fake_llm import FakeLLMServer

    key = "sk-doctor-key-9d2c4b7e"
    database = f"sqlite:///{tmp_path / 'navi.db'}"
    with FakeLLMServer.in_thread(models=("gpt-doctor",), api_key=key) as openai:

        async def save() -> None:
            async with store_for_url(database) as store:
                change = SettingsUpdated(
                    backend_type="openai",
                    backend_url=f"{openai.url}/v1",
                    api_key_hint=mask_key(key),
                )
                await SettingsService(store).update(SERVER, change)

        anyio.run(save)
        KeyFile(tmp_path / "data" / "secrets" / "llm_api_key").write(key)
        done = subprocess.run(
            [sys.executable, "-m", "navi.cli", "doctor"],
            env={
                "PATH": "/usr/bin:/bin",
                "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
                "NAVI_DATABASE_URL": database,
                "NAVI_DATA_DIR": str(tmp_path / "data"),
                "OLLAMA_HOST": "http://127.0.0.1:1",
                "TOOLS_DIR": str(tmp_path / "tools"),
                "HOME": str(tmp_path),
            },
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert openai.received[-1].headers["authorization"] == f"Bearer {key}"
    assert f"✓ LLM: openai at {openai.url}/v1, model gpt-doctor" in done.stdout, done.stdout
    assert "✓ models available: gpt-doctor" in done.stdout
    assert key not in done.stdout + done.stderr
