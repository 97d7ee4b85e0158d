from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.local_servers import LocalHTTPServer
from tools import InMemoryToolState, ToolContext, ToolRegistry, ToolSettings, create_registry


@pytest.fixture
def files_dir(tmp_path: Path) -> Path:
    path = tmp_path / "session_files" / "s1"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    path = tmp_path / "user_tools"
    path.mkdir()
    return path


@pytest.fixture
def settings(tools_dir: Path, tmp_path: Path) -> ToolSettings:
    return ToolSettings(
        tools_dir=str(tools_dir),
        manuals_dir=str(tmp_path / "manuals"),
        ssh_hosts_file=str(tmp_path / "ssh_hosts.json"),
        kill_grace_s=0.5,
    )


@pytest.fixture
def state() -> InMemoryToolState:
    return InMemoryToolState()


def make_ctx(
    files_dir: Path, settings: ToolSettings, state: InMemoryToolState, **kw: Any
) -> ToolContext:
    return ToolContext.standalone("s1", files_dir, settings=settings, state=state, **kw)


@pytest.fixture
def ctx(files_dir: Path, settings: ToolSettings, state: InMemoryToolState) -> ToolContext:
    return make_ctx(files_dir, settings, state)


@pytest.fixture
def registry(settings: ToolSettings) -> ToolRegistry:
    return create_registry(settings)


@pytest.fixture
def http_server() -> Iterator[LocalHTTPServer]:
    with LocalHTTPServer() as server:
        yield server
