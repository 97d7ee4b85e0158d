"""MCP servers at Navi's trust boundaries, in a real ``navi serve``: a stdio server's
environment holds only what its entry names (never the server's secrets); with
``"sandbox": true`` it cannot read the server's files either, and no entry can make its
sandbox show them (``rw`` paths, ``args``, a server's name as its home's path); its
tools reach only the profiles its entry names, whatever the LLM calls."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from navi.mcp.environment import PASSED_THROUGH
from navi.mcp.sandbox import SandboxPlaces, SandboxRefused, server_home
from tests.navi.mcp.support import BOX_SCRIPT, box_entry, calls, stdio_entry, write_config
from tests.security.conftest import CANARY_ENV, NaviServerProcess, StartNavi, fresh
from tests.support.fake_llm_script import FakeToolCall, Reply
from tools.sandbox import sandbox_status

pytest.importorskip("mcp")


def _listed(server: NaviServerProcess, query: str = "") -> set[str]:
    with server.client() as http:
        response = http.get("/agents/tools" + query)
        return {t["name"] for t in response.json()}


def _wait_for_tools(server: NaviServerProcess, *names: str) -> None:
    deadline = time.monotonic() + 40
    while not set(names) <= _listed(server):
        assert time.monotonic() < deadline, f"{names} never listed:\n{server.logs()}"
        time.sleep(0.05)


def _call(server: NaviServerProcess, sid: str, name: str, **arguments: Any) -> dict[str, Any]:
    server.llm.script(
        Reply(tool_calls=[FakeToolCall(name=name, arguments=arguments)]), Reply(text="done")
    )
    response: httpx.Response = server.send(sid, "go")
    assert response.status_code == 200, response.text
    result: dict[str, Any] = server.tool_messages(sid)[-1]
    return result


def _environment(result: dict[str, Any]) -> dict[str, str]:
    text = result["content"]
    env: dict[str, str] = json.loads(text[text.index("{") : text.rindex("}") + 1])["env"]
    return env


@dataclass(frozen=True)
class _Shared:
    server: NaviServerProcess
    logs: Path  # each entry's calls: logs / <entry name>


# One `navi serve` (a process start costs seconds) for the tests that each use an entry
# of their own and only call it: a plain one, a sandboxed one, one for smart_home only.
@pytest.fixture(scope="module")
def _shared(start_module_navi: StartNavi, tmp_path_factory: pytest.TempPathFactory) -> _Shared:
    root = tmp_path_factory.mktemp("mcp-entries")
    logs = root / "logs"
    logs.mkdir()
    entries = {
        "plain": stdio_entry(logs / "plain", env={"MCP_SETTING": "given-by-the-entry"}),
        "home": stdio_entry(logs / "home", profiles=["smart_home"]),
    }
    if sandbox_status().available:
        entries["boxed"] = stdio_entry(logs / "boxed", sandbox=True)
    config = write_config(root / "mcp.json", entries)
    return _Shared(start_module_navi(env={"NAVI_MCP_CONFIG": str(config)}), logs)


@pytest.fixture
def shared(_shared: _Shared) -> _Shared:
    fresh(_shared.server)
    return _shared


def test_a_stdio_server_sees_only_its_entrys_environment(shared: _Shared) -> None:
    server = shared.server
    _wait_for_tools(server, "mcp__plain__environment")
    sid = server.create_session("secretary")
    result = _call(server, sid, "mcp__plain__environment")
    assert result["success"], result
    env = _environment(result)
    assert env["MCP_SETTING"] == "given-by-the-entry"
    assert not set(CANARY_ENV) & set(env)
    assert server.leaked(result["content"]) == []
    allowed = {"MCP_SETTING", "MCP_TEST_LOG", "PATH", "HOME", "LANG", "LOGNAME", "SHELL", "TERM"}
    allowed |= set(PASSED_THROUGH)  # proxy and CA variables, when Navi has them
    assert set(env) - {"USER", "LC_CTYPE"} <= allowed


def test_a_sandboxed_server_cannot_read_the_servers_files(shared: _Shared) -> None:
    if not sandbox_status().available:
        pytest.skip(sandbox_status().reason)
    server = shared.server
    _wait_for_tools(server, "mcp__boxed__read")
    sid = server.create_session("secretary")
    for secret in (server.canary_file, server.home / ".ssh" / "id_ed25519", server.database):
        result = _call(server, sid, "mcp__boxed__read", path=str(secret))
        assert not result["success"] and "cannot read" in result["content"], result
        assert server.leaked(result["content"]) == []
    env = _environment(_call(server, sid, "mcp__boxed__environment"))
    assert not set(CANARY_ENV) & set(env)


def test_mcp_tools_reach_only_the_profiles_their_entry_names(shared: _Shared) -> None:
    server, log = shared.server, shared.logs / "home"
    _wait_for_tools(server, "mcp__home__echo")
    assert "mcp__home__echo" in _listed(server, "?profile_id=smart_home")
    assert "mcp__home__echo" not in _listed(server, "?profile_id=secretary")

    sid = server.create_session("secretary")
    before = len(server.llm.requests)
    refused = _call(server, sid, "mcp__home__echo", text="from-secretary-4d1e")
    offered = {t["function"]["name"] for t in server.llm.requests[before].get("tools") or ()}
    assert "mcp__home__echo" not in offered
    assert not refused["success"]
    assert "tool mcp__home__echo is not enabled in profile secretary" in refused["content"]
    assert not [c for c in calls(log) if c["tool"] == "echo"]

    home = server.create_session("smart_home")
    done = _call(server, home, "mcp__home__echo", text="from-smart-home")
    assert done["success"] and "from-smart-home" in done["content"]


def _log_events(server: NaviServerProcess, event: str) -> dict[str, str]:
    """Per server (or config problem), what the log said with ``event``."""
    found: dict[str, str] = {}
    for line in server.logs().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("event") == event:
            found[record.get("server") or record.get("problem", "")] = record.get("error", "")
    return found


def test_no_entry_makes_the_sandbox_show_navis_own_files(
    tmp_path: Path, start_navi: StartNavi
) -> None:
    if not sandbox_status().available:
        pytest.skip(sandbox_status().reason)
    data, config = tmp_path / "navi-data", tmp_path / "mcp.json"
    (data / "mcp").mkdir(parents=True)
    server = start_navi(
        env={"NAVI_MCP_CONFIG": str(config), "NAVI_DATA_DIR": str(data)}, canary_row=False
    )
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "innocent").symlink_to(data)
    # A home planted as a link out of the data folder is not followed.
    (data / "mcp" / "planted").symlink_to(server.root / "outside")
    refused = {
        "datadir": box_entry(rw=[str(data)]),
        "holder": box_entry(rw=[str(tmp_path)]),
        "database": box_entry(rw=[str(server.database)]),
        "databases": box_entry(rw=[str(server.database.parent)]),
        "sessions": box_entry(rw=[str(server.root / "files")]),
        "usertools": box_entry(rw=[str(server.root / "user_tools")]),
        "config": box_entry(rw=[str(config)]),
        "linked": box_entry(rw=[str(tmp_path / "innocent")]),
        "kernel": box_entry(rw=["/proc/sys"]),
        "system": box_entry(rw=["/etc"]),
        "shown": box_entry(args=[str(BOX_SCRIPT), str(server.database.parent)]),
        "planted": box_entry(),
    }
    unparsed = {
        "relative": box_entry(rw=["out"]),
        "dotdot": box_entry(rw=[f"{out}/../navi-data"]),
        "unsandboxed": {"command": "true", "rw": [str(out)]},
        "../../escape": box_entry(),
        "..": box_entry(),
        "a/b": box_entry(),
    }
    write_config(config, {"good": box_entry(rw=[str(out)]), **refused, **unparsed})
    _wait_for_tools(server, "mcp__good__write")
    deadline = time.monotonic() + 60
    while set(refused) - set(_log_events(server, "mcp.server_down")):
        assert time.monotonic() < deadline, server.logs()
        time.sleep(0.1)
    down = _log_events(server, "mcp.server_down")
    for name in refused:
        assert "SandboxRefused" in down[name], (name, down[name])
    assert "is a link elsewhere" in down["planted"]
    problems = " ".join(_log_events(server, "mcp.config_invalid"))
    for name, why in [
        ("relative", "must be absolute"),
        ("dotdot", 'must not contain ".."'),
        ("unsandboxed", '"sandbox": true'),
        ("../../escape", "1 to 32 letters"),
        ("..", "1 to 32 letters"),
        ("a/b", "1 to 32 letters"),
    ]:
        assert f"server {name!r}: " in problems and why in problems, (name, problems)
    listed = _listed(server)
    assert {t.split("__")[1] for t in listed if t.startswith("mcp__")} == {"good"}, listed

    # The server that started writes its rw folder, and nothing of Navi's.
    sid = server.create_session("secretary")
    wrote = _call(server, sid, "mcp__good__write", path=str(out / "a"), text="ok")
    assert wrote["success"], wrote
    for target in (server.database, config, data / "users.json", data / "mcp" / "x"):
        # (A path with no mount beneath it is not there; one with, say the folders above
        # the home, is the sandbox's own /tmp: written there, the host's file is not.)
        _call(server, sid, "mcp__good__write", path=str(target), text="owned")
        assert not target.exists() or not target.read_bytes().startswith(b"owned"), target
    assert server.database.read_bytes().startswith(b"SQLite format 3")
    # Homes only for names that parse, inside the data folder; nothing made by a link.
    assert {p.name for p in (data / "mcp").iterdir()} <= {"good", *refused}
    assert not (tmp_path / "escape").exists() and not (data / "escape").exists()
    assert sorted(p.name for p in (server.root / "outside").iterdir()) == ["canary.txt"]


@pytest.mark.parametrize("name", ["..", "../escape", "a/b", "/abs", "", ".", "x" * 33])
def test_a_server_name_never_becomes_a_path_out_of_the_homes(tmp_path: Path, name: str) -> None:
    places = SandboxPlaces(homes=tmp_path / "data" / "mcp", navi=(tmp_path / "data",))
    with pytest.raises(SandboxRefused, match="gets no home"):
        server_home(places, name)
    # Refused before anything is made.
    assert not (tmp_path / "data").exists() and not (tmp_path / "escape").exists()
    assert not Path("/abs").exists()
