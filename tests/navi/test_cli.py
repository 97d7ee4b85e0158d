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
