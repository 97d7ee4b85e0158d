from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.navi.cli.terminal import NaviServe, navi_env
from tests.support.fake_llm import FakeLLMProcess
from tests.support.helpers import free_port


@dataclass
class CliWorld:
    """A running ``navi serve`` with the fake LLM behind it, and the env of its clients."""

    root: Path
    fake: FakeLLMProcess
    server: NaviServe
    env: dict[str, str]


@contextmanager
def cli_world(root: Path, **env: str) -> Iterator[CliWorld]:
    """``navi serve`` in ``root`` with the fake LLM behind it (``env``: more settings)."""
    with FakeLLMProcess(default_text="Fine.") as fake:
        world_env = navi_env(root, fake.url, free_port(), **env)
        server = NaviServe(root, world_env)
        server.start()
        try:
            yield CliWorld(root, fake, server, world_env)
        finally:
            server.stop()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliWorld]:
    """One server for a module's tests (a start costs seconds): each test makes its own
    sessions, and a test that stops the server starts it again."""
    with cli_world(tmp_path_factory.mktemp("navi")) as running:
        yield running
