"""All configured MCP servers: started with Navi, each in a task of its own, and
changed when ``mcp.json`` changes (no restart of Navi).

:meth:`McpManager.run` reads the config, starts a :class:`ServerConnection` per entry
(a slow or failing server delays nobody: start-up does not wait for any), then looks
at the file's modification time every 2 s; when it changed, servers whose entry is
gone are stopped (their tools leave the registry), new ones are started, and changed
ones are restarted. Without the ``mcp`` package (``pip install 'navi[mcp]'``) a
config that names servers is reported and nothing else happens.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import anyio
import anyio.abc
import anyio.to_thread
import structlog

from navi.mcp.client import ServerConnection
from navi.mcp.config import McpConfig, ServerEntry, config_stamp, load_config
from navi.mcp.oauth import OAuthPlaces, SignIns
from navi.mcp.prompts import PromptInfo
from navi.mcp.sandbox import SandboxPlaces
from navi.mcp.status import ServerStatus
from tools.registry import ToolRegistry

log = structlog.get_logger(__name__)

POLL_S = 2.0
MISSING_SDK = "the mcp package is not installed: pip install 'navi[mcp]'"


def sdk_available() -> bool:
    return importlib.util.find_spec("mcp") is not None


def _import_sdk() -> None:
    import mcp.client.stdio
    import mcp.client.streamable_http  # noqa: F401


class _Running:
    def __init__(self, connection: ServerConnection, scope: anyio.CancelScope) -> None:
        self.connection = connection
        self.scope = scope
        self.done = anyio.Event()


class McpManager:
    def __init__(
        self,
        registry: ToolRegistry,
        path: Path,
        *,
        timeout_s: float = 60.0,
        poll_s: float = POLL_S,
        places: SandboxPlaces | None = None,
        oauth: OAuthPlaces | None = None,
    ) -> None:
        self.registry = registry
        self.path = path
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        # Sandboxed servers' homes and what their sandbox never shows (navi/mcp/sandbox.py).
        self.places = places
        # Remote servers' OAuth sign-ins: kept where, and those waiting for the user
        # (navi/mcp/oauth.py; the routes of navi/server/mcp_auth_routes.py finish them).
        self.oauth = oauth
        self.sign_ins = SignIns()
        self.config = McpConfig(path=str(path))
        self._running: dict[str, _Running] = {}
        self._stamp: tuple[int, int] | None = None

    def statuses(self) -> list[ServerStatus]:
        return [r.connection.status() for r in self._running.values()]

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the servers and follow the config file; ends when cancelled. Started
        (``tg.start``) once the servers' tasks are started, before any is connected."""
        try:
            async with anyio.create_task_group() as tg:
                while True:
                    stamp = config_stamp(self.path)
                    if stamp != self._stamp:
                        self._stamp = stamp
                        await self._apply(load_config(self.path), tg)
                    task_status.started()
                    task_status = anyio.TASK_STATUS_IGNORED
                    await anyio.sleep(self.poll_s)
        finally:
            for source in [f"mcp:{name}" for name in self._running]:
                self.registry.remove_external(source)

    def prompts(self) -> dict[str, tuple[str, ...]]:
        """Per running server, the names of its prompts (for a client's prompt menu)."""
        return {n: r.connection.status().prompts for n, r in self._running.items()}

    def prompt_list(self) -> dict[str, tuple[PromptInfo, ...]]:
        """Per running server, its prompts with their descriptions and arguments."""
        return {
            n: r.connection.prompt_list
            for n, r in self._running.items()
            if r.connection.state == "running"
        }

    async def prompt_text(self, server: str, name: str, arguments: dict[str, str]) -> str:
        """A server's prompt filled in, its messages' text joined (a composer puts it in
        the message box). Raises ``KeyError`` for a server not running, ``ToolError``
        when the server refuses."""
        from mcp_types import TextContent

        result = await self._running[server].connection.get_prompt(name, arguments)
        return "\n\n".join(
            m.content.text for m in result.messages if isinstance(m.content, TextContent)
        )

    async def wait_started(self, wait_s: float) -> None:
        """Wait until every server has connected or failed once, at most ``wait_s``."""
        with anyio.move_on_after(wait_s):
            for running in list(self._running.values()):
                await running.connection.first_attempt.wait()

    async def _apply(self, config: McpConfig, tg: anyio.abc.TaskGroup) -> None:
        for problem in config.errors:
            log.warning("mcp.config_invalid", path=config.path, problem=problem)
        if config.unusable and self._running:
            # A file being edited (half-saved, a typo): what runs goes on until it parses.
            log.warning("mcp.config_kept", path=config.path, servers=list(self._running))
            return
        self.config = config
        wanted = config.servers
        if wanted and not sdk_available():
            log.warning(
                "mcp.unavailable", path=config.path, servers=list(wanted), error=MISSING_SDK
            )
            wanted = {}
        if wanted:
            # The SDK takes a second or more of CPU to import: not on the event loop.
            await anyio.to_thread.run_sync(_import_sdk)
        for name, running in list(self._running.items()):
            if wanted.get(name) != running.connection.entry:
                await self._stop(name)
        for name, entry in wanted.items():
            if name not in self._running:
                self._start(entry, tg)
        log.info("mcp.config_loaded", path=config.path, servers=list(wanted))

    def _start(self, entry: ServerEntry, tg: anyio.abc.TaskGroup) -> None:
        connection = ServerConnection(
            entry,
            self.registry,
            timeout_s=self.timeout_s,
            places=self.places,
            oauth=self.oauth,
            sign_ins=self.sign_ins,
        )
        running = _Running(connection, anyio.CancelScope())
        self._running[entry.name] = running

        async def serve() -> None:
            try:
                with running.scope:
                    await connection.run()
            finally:
                running.done.set()

        tg.start_soon(serve, name=f"mcp:{entry.name}")

    async def _stop(self, name: str) -> None:
        running = self._running.pop(name)
        running.scope.cancel()
        await running.done.wait()
        log.info("mcp.server_stopped", server=name)


async def probe(
    config: McpConfig,
    registry: ToolRegistry,
    wait_s: float = 20.0,
    places: SandboxPlaces | None = None,
    oauth: OAuthPlaces | None = None,
) -> list[ServerStatus]:
    """Start every server of ``config`` once, for ``navi doctor``: each one's state,
    why it failed, and how many tools it gave (after at most ``wait_s``)."""
    if config.servers and not sdk_available():
        return [
            ServerStatus(name=n, transport=e.transport, state="failed", error=MISSING_SDK)
            for n, e in config.servers.items()
        ]
    if config.servers:
        await anyio.to_thread.run_sync(_import_sdk)
    connections = [
        ServerConnection(e, registry, places=places, oauth=oauth) for e in config.servers.values()
    ]
    statuses: list[ServerStatus] = []
    async with anyio.create_task_group() as tg:
        for connection in connections:
            tg.start_soon(connection.run)
        with anyio.move_on_after(wait_s):
            for connection in connections:
                await connection.first_attempt.wait()
        statuses = [c.status() for c in connections]
        tg.cancel_scope.cancel()
    return statuses
