"""A built-in tool whose library is missing or broken is unavailable, with the reason
said, and everything else works: the registry, ``navi doctor`` and a real ``navi serve``
(issue: a broken lxml took the whole server down through web_view)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.support.fake_llm import FakeLLMServer
from tests.support.navi_server import free_port
from tools import ToolContext, ToolRegistry, ok
from tools.base import Tool, ToolResult

ROOT = Path(__file__).resolve().parents[2]
# What lxml >= 5.2 without lxml_html_clean does to trafilatura (through jusText).
BROKEN_LIBRARY = "raise ImportError('lxml.html.clean module is now a separate project')\n"


class NeedsMissing(Tool):
    name = "needs_missing"
    description = "needs a library that is not installed"
    requires = ("navi_test_no_such_module",)

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ok("ran")


class NeedsNothing(NeedsMissing):
    name = "needs_nothing"
    requires = ()


async def test_a_tool_whose_library_is_missing_is_unavailable_with_the_reason(
    tmp_path: Path,
) -> None:
    registry = ToolRegistry()
    registry.register_builtin(NeedsMissing())
    registry.register_builtin(NeedsNothing())
    assert registry.names() == ["needs_nothing"]
    assert "navi_test_no_such_module" in registry.unavailable["needs_missing"]
    ctx = ToolContext.standalone("s", tmp_path)
    result = await registry.execute("needs_missing", {}, ctx)
    assert not result.success
    assert "unavailable" in (result.error or "")
    assert "navi_test_no_such_module" in (result.error or "")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A Navi whose trafilatura fails to import, as a half-installed lxml makes it."""
    shadow = tmp_path / "shadow"
    (shadow / "trafilatura").mkdir(parents=True, exist_ok=True)
    (shadow / "trafilatura" / "__init__.py").write_text(BROKEN_LIBRARY)
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        PYTHONPATH=f"{shadow}{os.pathsep}{ROOT}",
        HOME=str(tmp_path),
        NAVI_DATA_DIR=str(tmp_path / "data"),
        NAVI_DATABASE_URL=f"sqlite:///{tmp_path / 'navi.db'}",
        TOOLS_DIR=str(tmp_path / "tools"),
        NAVI_PLANNING="off",
        **extra,
    )
    return env


def test_doctor_names_the_unavailable_tool(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "navi.cli", "doctor"],
        env=_env(tmp_path, OLLAMA_HOST="http://127.0.0.1:1"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert "✗   tool web_view is unavailable: tools.builtin.page_text cannot be imported" in (
        done.stdout
    )
    assert re.search(r"\d+ problems? found", done.stdout), done.stdout


async def test_the_server_starts_without_the_broken_tool(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    async with FakeLLMServer() as fake:
        env = _env(tmp_path, OLLAMA_HOST=fake.url, NAVI_LLM_BACKEND="ollama")
        with open(log, "wb") as out:
            process = await anyio.open_process(
                [sys.executable, "-m", "navi.cli", "serve", "--port", str(port)],
                env=env,
                cwd=tmp_path,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            url = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=url, timeout=5) as client:
                deadline = time.monotonic() + 60
                while True:
                    assert process.returncode is None, log.read_text()
                    try:
                        if (await client.get("/health")).status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    assert time.monotonic() < deadline, log.read_text()
                    await anyio.sleep(0.05)
                names = [t["name"] for t in (await client.get("/agents/tools")).json()]
            assert "web_view" not in names
            assert "filesystem" in names and "image_view" in names
            assert '"tool": "web_view"' in log.read_text()
            assert "tools.unavailable" in log.read_text()
        finally:
            process.terminate()
            with anyio.fail_after(15):
                await process.wait()


@pytest.mark.parametrize("module", ["navi.blobs", "navi.app"])
def test_the_core_imports_no_tool_library(tmp_path: Path, module: str) -> None:
    """The blob store sniffs image types without importing the built-in tools."""
    code = f"import {module}, sys; assert 'trafilatura' not in sys.modules, 'imported'"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
