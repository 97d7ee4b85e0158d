from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.navi.cli.terminal import NaviServe, free_port, navi_env
from tests.support.fake_llm import FakeLLMProcess


@dataclass
class CliWorld:
    """A running ``navi serve`` with the fake LLM behind it, and the env of its clients."""

    root: Path
    fake: FakeLLMProcess
    server: NaviServe
    env: dict[str, str]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliWorld]:
    """One server for a module's tests (a start costs seconds): each test makes its own
    sessions, and a test that stops the server starts it again."""
    root = tmp_path_factory.mktemp("navi")
    with FakeLLMProcess(default_text="Fine.") as fake:
        env = navi_env(root, fake.url, free_port())
        server = NaviServe(root, env)
        server.start()
        try:
            yield CliWorld(root, fake, server, env)
        finally:
            server.stop()
