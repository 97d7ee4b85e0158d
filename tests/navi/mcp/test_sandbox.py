"""MCP servers with ``"sandbox": true`` launched as people launch them, in real bubblewrap:
a venv's console script on a Python whose prefix is elsewhere (pyenv, uv), ``node
/abs/dist/index.js`` with its siblings and dependencies, an npx/uvx-style cache in a home
that lasts, ``rw`` folders, the end of the stderr of one that fails, and a network that
never reaches this machine's loopback."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import navi.mcp.client
from navi.config import Settings
from navi.mcp.client import ServerConnection
from navi.mcp.config import parse_config
from navi.mcp.sandbox import SandboxPlaces, sandbox_places
from tests.navi.mcp.support import BOX_SCRIPT, box_entry
from tests.support.helpers import answering_http, interface_address
from tools import ToolContext, ToolRegistry
from tools.base import ToolResult
from tools.sandbox import sandbox_status
from tools.sandbox_net import find_slirp4netns

mcp = pytest.importorskip("mcp")
pytestmark = pytest.mark.skipif(
    not sandbox_status().available, reason=f"no sandbox here: {sandbox_status().reason}"
)
needs_slirp = pytest.mark.skipif(
    find_slirp4netns() is None, reason="slirp4netns is not installed (the sandbox's network)"
)
NODE_BOX = Path(__file__).with_name("node_box")


@pytest.fixture
def places(tmp_path: Path) -> SandboxPlaces:
    """Navi's places for a data folder of this test's own (as `navi serve` computes them)."""
    (tmp_path / "data").mkdir()
    return sandbox_places(Settings.from_env({"NAVI_DATA_DIR": str(tmp_path / "data")}))


@asynccontextmanager
async def serving(
    raw: dict[str, Any], places: SandboxPlaces, name: str = "box"
) -> AsyncIterator[tuple[ServerConnection, ToolRegistry]]:
    """The entry's server, once it has started or failed (stopped at the end)."""
    config = parse_config(json.dumps({"mcpServers": {name: raw}}))
    assert not config.errors, config.errors
    registry = ToolRegistry()
    connection = ServerConnection(config.servers[name], registry, timeout_s=30, places=places)
    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.run)
        await connection.first_attempt.wait()
        yield connection, registry
        tg.cancel_scope.cancel()


async def call(registry: ToolRegistry, tool: str, folder: Path, /, **arguments: Any) -> ToolResult:
    return await registry.execute(tool, arguments, ToolContext.standalone("s", folder))


def _console_script(tmp_path: Path) -> Path:
    """A venv made by ``python -m venv`` (its ``python`` links to the real interpreter),
    with the box server installed as a console script: its sources and the SDK on the
    venv's path by a ``.pth`` file, as an editable install puts them (no network)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    sources = tmp_path / "src"
    sources.mkdir()
    shutil.copy(BOX_SCRIPT, sources / "navi_box.py")
    [site] = venv.glob("lib/python*/site-packages")
    sdk = Path(mcp.__file__).resolve().parents[1]
    (site / "navi_box.pth").write_text(f"{sources}\n{sdk}\n", encoding="utf-8")
    script = venv / "bin" / "navi-box"
    script.write_text(
        f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom navi_box import main\n"
        "if __name__ == '__main__':\n    sys.exit(main())\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


async def test_a_venv_console_script_starts_in_the_sandbox(
    tmp_path: Path, places: SandboxPlaces
) -> None:
    script = _console_script(tmp_path)
    raw = {"command": str(script), "sandbox": True}
    async with serving(raw, places) as (connection, registry):
        assert connection.state == "running", connection.error
        result = await call(registry, "mcp__box__cache", tmp_path)
    assert result.success, result.error
    assert json.loads(result.output)["home"] == str(places.homes / "box" / "home")


async def test_a_console_script_found_on_path_by_name_starts_too(
    tmp_path: Path, places: SandboxPlaces, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _console_script(tmp_path)
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")
    async with serving({"command": "navi-box", "sandbox": True}, places) as (connection, _):
        assert connection.state == "running", connection.error


def _node_package(root: Path) -> Path:
    """A built package: package.json, dist/index.js importing ./protocol.js and the
    dependency node_modules/tiny-greeting."""
    (root / "dist").mkdir(parents=True)
    (root / "package.json").write_text(json.dumps({"name": "node-box", "type": "module"}))
    shutil.copy(NODE_BOX / "index.js", root / "dist" / "index.js")
    shutil.copy(NODE_BOX / "protocol.js", root / "dist" / "protocol.js")
    dependency = root / "node_modules" / "tiny-greeting"
    dependency.mkdir(parents=True)
    manifest = {"name": "tiny-greeting", "type": "module", "main": "index.js"}
    (dependency / "package.json").write_text(json.dumps(manifest))
    shutil.copy(NODE_BOX / "greeting.js", dependency / "index.js")
    return root / "dist" / "index.js"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_node_runs_a_built_package_with_its_siblings_and_dependencies(
    tmp_path: Path, places: SandboxPlaces
) -> None:
    index = _node_package(tmp_path / "node-box")
    raw = {"command": "node", "args": [str(index)], "sandbox": True}
    async with serving(raw, places) as (connection, registry):
        assert connection.state == "running", connection.error
        result = await call(registry, "mcp__box__greet", tmp_path, name="navi")
    assert result.success, result.error
    assert result.output == "hello navi, from a sandboxed node server"


async def test_a_servers_home_lasts_so_its_cache_downloads_once(
    tmp_path: Path, places: SandboxPlaces
) -> None:
    home = places.homes / "box" / "home"
    for start in (1, 2):
        async with serving(box_entry(), places) as (connection, registry):
            assert connection.state == "running", connection.error
            result = await call(registry, "mcp__box__cache", tmp_path)
        assert result.success, result.error
        seen = json.loads(result.output)
        assert seen == {"home": str(home), "cwd": str(home), "downloads": 1, "starts": start}
    assert (home / ".cache" / "navi-box" / "package.txt").is_file()
    for folder in (home, home.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


async def test_rw_paths_are_writable_and_what_args_name_stays_read_only(
    tmp_path: Path, places: SandboxPlaces
) -> None:
    out, shown = tmp_path / "out", tmp_path / "shown"
    out.mkdir()
    shown.mkdir()
    raw = box_entry(args=[str(BOX_SCRIPT), str(shown)], rw=[str(out)])
    async with serving(raw, places) as (connection, registry):
        assert connection.state == "running", connection.error
        wrote = await call(registry, "mcp__box__write", tmp_path, path=str(out / "a"), text="hi")
        refused = await call(registry, "mcp__box__write", tmp_path, path=str(shown / "a"), text="x")
    assert wrote.success, wrote.error
    assert (out / "a").read_text() == "hi"
    assert not refused.success and "Read-only file system" in (refused.error or "")
    assert not (shown / "a").exists()


@pytest.mark.anyio
@pytest.mark.parametrize("sandboxed", [False, True])
async def test_a_server_that_dies_before_initialize_shows_the_end_of_its_stderr(
    tmp_path: Path, places: SandboxPlaces, sandboxed: bool
) -> None:
    # Long and not ASCII: 6,029 bytes, whose last 2,400 start in the middle of an "é".
    dies = "import sys; sys.stderr.write('é' * 3001 + ' the-real-reason: no token!'); sys.exit(3)"
    raw = {"command": sys.executable, "args": ["-c", dies], "sandbox": sandboxed}
    async with serving(raw, places) as (connection, registry):
        assert connection.state == "failed"
        assert connection.error.endswith("the-real-reason: no token!"), connection.error
        assert registry.external_names == ()


async def test_a_sandboxed_server_that_never_answers_says_what_it_said_and_may_lack(
    tmp_path: Path, places: SandboxPlaces, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(navi.mcp.client, "START_TIMEOUT_S", 2.0)
    hangs = "import sys, time; print('fetching the package…', file=sys.stderr); time.sleep(600)"
    raw = {"command": sys.executable, "args": ["-u", "-c", hangs], "sandbox": True}
    async with serving(raw, places) as (connection, _):
        assert connection.state == "failed"
    assert "did not answer in 2 s" in connection.error, connection.error
    assert 'needs "network": true' in connection.error
    assert connection.error.endswith("its stderr: fetching the package…")


@needs_slirp
async def test_network_true_reaches_the_lan_but_never_this_machines_loopback(
    tmp_path: Path, places: SandboxPlaces
) -> None:
    address = interface_address()
    if address is None:
        pytest.skip("this machine has no address but loopback to reach the network by")
    fetched: dict[str, str] = {}
    with (
        answering_http("127.0.0.1") as (local, local_asked),
        answering_http("0.0.0.0") as (lan, lan_asked),
    ):
        urls = [
            f"http://127.0.0.1:{local}/loopback",
            f"http://10.0.2.2:{local}/gateway",  # slirp4netns's way to the host's loopback
            f"http://10.0.2.2:{lan}/gateway",
            f"http://{address}:{lan}/interface",  # as another machine on the LAN would
        ]
        async with serving(box_entry(network=True), places) as (connection, registry):
            assert connection.state == "running", connection.error
            for url in urls:
                result = await call(registry, "mcp__box__fetch", tmp_path, url=url)
                fetched[url] = result.output
    for url in urls[:3]:
        assert fetched[url].startswith("UNREACHABLE"), fetched
    assert fetched[urls[3]] == "REACHED 200", fetched
    assert local_asked == [] and lan_asked == ["/interface"], (local_asked, lan_asked)


async def test_network_true_without_slirp4netns_refuses_rather_than_share_the_hosts(
    tmp_path: Path, places: SandboxPlaces, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("navi.mcp.sandbox.find_slirp4netns", lambda: None)
    async with serving(box_entry(network=True), places) as (connection, registry):
        assert connection.state == "failed"
        assert "needs slirp4netns" in connection.error, connection.error
        assert registry.external_names == ()
