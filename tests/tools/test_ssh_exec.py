from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.local_servers import LocalSSHServer, local_ssh_server, write_hosts_file
from tools import ToolContext, ToolSettings
from tools.builtin.ssh_exec import SshExecTool, SshPool
from tools.registry import ToolRegistry

pytestmark = pytest.mark.anyio


@pytest.fixture
async def ssh_server(tmp_path: Path) -> AsyncIterator[LocalSSHServer]:
    async with local_ssh_server(tmp_path) as server:
        yield server


@pytest.fixture
async def ssh_registry(settings: ToolSettings) -> AsyncIterator[tuple[ToolRegistry, SshPool]]:
    pool = SshPool()
    registry = ToolRegistry(settings)
    registry.register_builtin(SshExecTool(pool))
    try:
        yield registry, pool
    finally:
        await pool.close_all()


def raw_hosts(settings: ToolSettings, text: str) -> None:
    Path(settings.ssh_hosts_file).write_text(text)


def hosts(settings: ToolSettings, entries: dict[str, dict[str, Any]]) -> None:
    write_hosts_file(Path(settings.ssh_hosts_file), entries)


async def test_runs_a_command_and_reuses_the_connection(
    ssh_server: LocalSSHServer,
    ssh_registry: tuple[ToolRegistry, SshPool],
    settings: ToolSettings,
    ctx: ToolContext,
) -> None:
    registry, pool = ssh_registry
    hosts(settings, {"box": ssh_server.hosts_entry()})
    first = await registry.execute("ssh_exec", {"host": "box", "command": "echo hello"}, ctx)
    assert first.success, first.output
    assert first.output == "exit status: 0\nhello\n"
    second = await registry.execute("ssh_exec", {"host": "box", "command": "echo err >&2"}, ctx)
    assert second.output == "exit status: 0\nerr\n"
    assert len(pool) == 1
    assert ssh_server.commands == ["echo hello", "echo err >&2"]
    await registry.close_session("s1")
    assert len(pool) == 0


async def test_key_file_auth_and_pool_per_session(
    ssh_server: LocalSSHServer,
    ssh_registry: tuple[ToolRegistry, SshPool],
    settings: ToolSettings,
    ctx: ToolContext,
    files_dir: Path,
) -> None:
    registry, pool = ssh_registry
    hosts(settings, {"box": ssh_server.hosts_entry(use_key=True)})
    other = ToolContext.standalone("s2", files_dir, settings=settings)
    assert (await registry.execute("ssh_exec", {"host": "box", "command": "true"}, ctx)).success
    assert (await registry.execute("ssh_exec", {"host": "box", "command": "true"}, other)).success
    assert len(pool) == 2
    await pool.close_session("s1")
    assert len(pool) == 1


async def test_nonzero_exit_and_output_cap(
    ssh_server: LocalSSHServer,
    ssh_registry: tuple[ToolRegistry, SshPool],
    settings: ToolSettings,
    ctx: ToolContext,
) -> None:
    registry, _ = ssh_registry
    hosts(settings, {"box": ssh_server.hosts_entry()})
    failed = await registry.execute("ssh_exec", {"host": "box", "command": "echo no; exit 3"}, ctx)
    assert not failed.success
    assert failed.error == "exit status 3"
    assert failed.output == "exit status: 3\nno\n"
    big = await registry.execute(
        "ssh_exec", {"host": "box", "command": "head -c 50000 /dev/zero | tr '\\0' y"}, ctx
    )
    assert big.output.endswith("[... output truncated: 30000 more characters]")


async def test_timeout_closes_the_channel(
    ssh_server: LocalSSHServer,
    ssh_registry: tuple[ToolRegistry, SshPool],
    settings: ToolSettings,
    ctx: ToolContext,
) -> None:
    registry, _ = ssh_registry
    hosts(settings, {"box": ssh_server.hosts_entry()})
    slow = await registry.execute(
        "ssh_exec", {"host": "box", "command": "echo started; sleep 3", "timeout_s": 1}, ctx
    )
    assert slow.failure_reason == "timeout"
    assert "timed out after 1s" in slow.output
    # The pooled connection still serves the next call.
    after = await registry.execute("ssh_exec", {"host": "box", "command": "echo again"}, ctx)
    assert after.output == "exit status: 0\nagain\n"


async def test_configuration_errors(
    ssh_server: LocalSSHServer,
    ssh_registry: tuple[ToolRegistry, SshPool],
    settings: ToolSettings,
    ctx: ToolContext,
) -> None:
    registry, _ = ssh_registry
    call = {"host": "box", "command": "true"}
    missing = await registry.execute("ssh_exec", call, ctx)
    assert missing.error == f"no SSH hosts are configured: {settings.ssh_hosts_file} does not exist"
    raw_hosts(settings, "[1]")
    assert "must hold a JSON object" in (
        (await registry.execute("ssh_exec", call, ctx)).error or ""
    )
    hosts(settings, {"other": ssh_server.hosts_entry()})
    unknown = await registry.execute("ssh_exec", call, ctx)
    assert unknown.error == "unknown SSH host 'box'. Configured hosts: other"
    wrong_password = {**ssh_server.hosts_entry(), "password": "wrong"}
    hosts(settings, {"box": wrong_password})
    denied = await registry.execute("ssh_exec", call, ctx)
    assert "cannot connect to box (127.0.0.1:" in (denied.error or "")
    hosts(settings, {"box": {"host": "127.0.0.1", "port": 1, "known_hosts": None}})
    refused = await registry.execute("ssh_exec", call, ctx)
    assert "cannot connect to box (127.0.0.1:1)" in (refused.error or "")
    raw_hosts(settings, json.dumps({"box": {"port": 22}}))
    no_host = await registry.execute("ssh_exec", call, ctx)
    assert 'needs at least a "host" string' in (no_host.error or "")
