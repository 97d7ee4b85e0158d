"""``ssh_exec``: run a command on a named host from SSH_HOSTS_FILE, over pooled connections.

The hosts file is JSON: ``{"name": {"host": "...", "port": 22, "username": "...",
"key_file": "..." | "password": "...", "known_hosts": null | "path"}}``. ``known_hosts``
absent uses ``~/.ssh/known_hosts``; ``null`` turns host-key checking off (trusted LAN only).
Connections are kept per (session, host) and closed with :meth:`SshPool.close_session`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from tools.base import (
    CallDescription,
    SessionScope,
    Tool,
    ToolError,
    ToolResult,
    fail,
    ok,
    shorten,
    truncation_marker,
)
from tools.context import ToolContext

if TYPE_CHECKING:
    import asyncssh

log = structlog.get_logger()
_UNSET: Any = object()


@dataclass(frozen=True)
class SshHost:
    name: str
    host: str
    port: int = 22
    username: str | None = None
    key_file: str | None = None
    password: str | None = None
    known_hosts: Any = _UNSET  # a path, None (no checking), or unset (asyncssh's default)

    def connect_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"host": self.host, "port": self.port}
        if self.username:
            options["username"] = self.username
        if self.key_file:
            options["client_keys"] = [str(Path(self.key_file).expanduser())]
        if self.password is not None:
            options["password"] = self.password
        if not self.key_file:
            # Only the configured key: do not wander through ~/.ssh or an agent.
            options["client_keys"] = None
            options["agent_path"] = None
        if self.known_hosts is not _UNSET:
            options["known_hosts"] = self.known_hosts
        return options


def load_hosts(path: Path) -> dict[str, SshHost]:
    if not path.exists():
        raise ToolError(f"no SSH hosts are configured: {path} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ToolError(f"cannot read the SSH hosts file {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ToolError(f"the SSH hosts file {path} must hold a JSON object of named hosts")
    hosts: dict[str, SshHost] = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("host"), str):
            raise ToolError(f"SSH host '{name}' in {path} needs at least a \"host\" string")
        try:
            hosts[name] = SshHost(
                name=name,
                host=entry["host"],
                port=int(entry.get("port", 22)),
                username=entry.get("username"),
                key_file=entry.get("key_file"),
                password=entry.get("password"),
                known_hosts=entry.get("known_hosts", _UNSET),
            )
        except (TypeError, ValueError) as exc:
            raise ToolError(f"SSH host '{name}' in {path} is invalid: {exc}") from None
    return hosts


class SshPool:
    """Open connections keyed by (session id, host name), reused across calls."""

    def __init__(self) -> None:
        self._connections: dict[tuple[str, str], asyncssh.SSHClientConnection] = {}
        self._locks: dict[tuple[str, str], anyio.Lock] = {}

    def __len__(self) -> int:
        return len(self._connections)

    async def get(
        self, session_id: str, host: SshHost, timeout_s: float
    ) -> asyncssh.SSHClientConnection:
        import asyncssh

        key = (session_id, host.name)
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            existing = self._connections.get(key)
            if existing is not None and not existing.is_closed():
                return existing
            try:
                with anyio.fail_after(timeout_s):
                    connection = await asyncssh.connect(**host.connect_options())
            except TimeoutError:
                raise ToolError(
                    f"connecting to {host.name} timed out after {timeout_s:g}s"
                ) from None
            except (OSError, asyncssh.Error) as exc:
                raise ToolError(
                    f"cannot connect to {host.name} ({host.host}:{host.port}): {exc}"
                ) from None
            self._connections[key] = connection
            return connection

    async def close_session(self, session_id: str) -> None:
        for key in [k for k in self._connections if k[0] == session_id]:
            await self._close(key)

    async def close_all(self) -> None:
        for key in list(self._connections):
            await self._close(key)

    async def discard(self, session_id: str, host_name: str) -> None:
        """Drop one connection (after an error, so the next call reconnects)."""
        await self._close((session_id, host_name))

    async def _close(self, key: tuple[str, str]) -> None:
        connection = self._connections.pop(key, None)
        self._locks.pop(key, None)
        if connection is not None:
            connection.close()
            with anyio.move_on_after(5, shield=True):
                await connection.wait_closed()


class SshExecTool(Tool):
    name = "ssh_exec"
    approval = "ask"  # runs commands on the user's machine
    uses_files = False
    description = (
        "Run a command on a named remote host over SSH and return its exit status and output "
        "(stdout and stderr). Hosts are configured by the user; an unknown name lists them."
    )
    parameters = {
        "type": "object",
        "properties": {
            "host": {"type": "string", "minLength": 1, "description": "The host's name."},
            "command": {"type": "string", "minLength": 1, "description": "The remote command."},
            "timeout_s": {"type": "number", "minimum": 1, "description": "Default 30."},
        },
        "required": ["host", "command"],
        "additionalProperties": False,
    }
    idempotent = False
    requires = ("asyncssh",)

    def __init__(self, pool: SshPool | None = None) -> None:
        self.pool = pool if pool is not None else SshPool()

    def timeout_for(self, args: dict[str, Any]) -> float:
        return float(args.get("timeout_s") or 600.0) + 30.0

    async def close_session(self, session_id: str) -> None:
        await self.pool.close_session(session_id)

    async def aclose(self) -> None:
        await self.pool.close_all()

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        name = str(args.get("host", ""))
        command = str(args.get("command", ""))
        return CallDescription(
            summary=f"Run the command {shorten(command, 300)} on the SSH host {name}",
            target=f"{name}: {command}",
            risk=f"runs a command on the machine {name} as the user its SSH entry logs in as",
            default_asker="Navi asks before running commands on other machines",
            scope=SessionScope(f"ssh_exec:{name}", f"Allow any command on {name}"),
        )

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        import asyncssh

        settings = ctx.settings
        hosts = load_hosts(Path(settings.ssh_hosts_file))
        host = hosts.get(args["host"])
        if host is None:
            known = ", ".join(sorted(hosts)) or "none"
            raise ToolError(f"unknown SSH host '{args['host']}'. Configured hosts: {known}")
        timeout = min(
            float(args.get("timeout_s") or settings.ssh_timeout_s), settings.ssh_max_timeout_s
        )
        connection = await self.pool.get(ctx.session_id, host, settings.http_timeout_s)
        limit = settings.output_max_chars
        kept: list[str] = []
        size = dropped = 0
        try:
            with anyio.fail_after(timeout):
                async with connection.create_process(
                    args["command"], stderr=asyncssh.STDOUT, encoding="utf-8", errors="replace"
                ) as process:
                    while chunk := await process.stdout.read(65536):
                        room = limit - size
                        if room > 0:
                            kept.append(chunk[:room])
                            size += min(room, len(chunk))
                        dropped += max(0, len(chunk) - max(room, 0))
                    completed = await process.wait()
        except TimeoutError:
            message = f"timed out after {timeout:g}s; the channel was closed"
            return fail(
                message, f"Error: {message}\nPartial output:\n{''.join(kept)}", reason="timeout"
            )
        except (OSError, asyncssh.Error) as exc:
            await self.pool.discard(ctx.session_id, host.name)
            raise ToolError(f"SSH to {host.name} failed: {exc}") from None
        output = "".join(kept) + (truncation_marker(dropped) if dropped else "")
        status = completed.exit_status
        text = f"exit status: {status}\n{output or '(no output)'}"
        if status != 0:
            return fail(f"exit status {status}", text)
        return ok(text)
