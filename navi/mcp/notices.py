"""What an MCP server says on its own: list changes, log lines, progress.

- ``notifications/tools/list_changed`` (and the resources' and prompts'): the
  connection re-reads the list at once instead of at its next check (navi/mcp/client.py;
  at most once a second, so a server that floods them costs one listing a second).
  A 2025-era server sends them unasked; a 2026-07-28 one through ``subscriptions/listen``,
  which the connection opens when the server says it sends them.
- ``notifications/message`` (log lines): into Navi's log at their level (``mcp.server_log``,
  at most ``LOG_LINES_PER_S`` a second; the rest are counted), and into the messages of
  the call in flight when there is only one (a line cannot say which call it is about).
- ``notifications/progress``: into the messages of the call that asked for it, and
  on to the call's progress callback (``ToolContext.progress``) while it runs: the
  run records it as ``tool.progress`` (navi/run/tool_progress.py bounds it).

A call's messages (:class:`CallMessages`) are kept short (the last ``CALL_LINES`` lines,
each at most ``LINE_MAX`` characters) and come back with its result (navi/mcp/tools.py).
Everything a server says is redacted (navi/log_redaction.py) before it is logged or kept.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import structlog

from navi.log_redaction import redact_text

log = structlog.get_logger(__name__)

LINE_MAX = 300
CALL_LINES = 20
LOG_LINES_PER_S = 20
# A listen stream that ended is opened again after this long.
RELISTEN_S = 5.0
# MCP's levels (RFC 5424's) → the standard library's names structlog logs at.
_LEVELS = {
    "debug": "debug",
    "info": "info",
    "notice": "info",
    "warning": "warning",
    "error": "error",
    "critical": "critical",
    "alert": "critical",
    "emergency": "critical",
}


def one_line(value: Any, limit: int = LINE_MAX) -> str:
    """A server's value (any JSON) as one redacted line of at most ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    line = " ".join(text[: limit * 4].split())
    line = redact_text(line)
    return line if len(line) <= limit else line[: limit - 1] + "…"


class CallMessages:
    """What the server said while one call ran: its progress and log lines."""

    def __init__(
        self, forward: Callable[[float, float | None, str | None], Awaitable[None]] | None = None
    ) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=CALL_LINES)
        self.dropped = 0
        # The call's progress callback (the tool context's), told every progress too.
        self.forward = forward

    def add(self, line: str) -> None:
        if len(self.lines) == self.lines.maxlen:
            self.dropped += 1
        self.lines.append(line)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """The SDK's progress callback for the call."""
        done = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        self.add(f"progress {done}" + (f": {one_line(message)}" if message else ""))
        if self.forward is not None:
            await self.forward(progress, total, one_line(message) if message else None)

    def text(self) -> str:
        """The lines, for the tool's output; empty when the server said nothing."""
        if not self.lines:
            return ""
        head = f"[{self.dropped} earlier lines left out]\n" if self.dropped else ""
        return head + "\n".join(self.lines)


class ServerNotices:
    """One connection's listener: the SDK's ``message_handler`` and ``logging_callback``."""

    def __init__(self, server: str) -> None:
        self.server = server
        # Wakes the connection's watch loop: a list changed ("tools", "others" in
        # ``changed``), or a call found the connection broken.
        self.wake = anyio.Event()
        self.changed: set[str] = set()
        self.calls: list[CallMessages] = []
        self._second = 0.0
        self._logged = 0
        self._unlogged = 0

    async def on_message(self, message: Any) -> None:
        from mcp_types import (
            PromptListChangedNotification,
            ResourceListChangedNotification,
            ToolListChangedNotification,
        )

        if isinstance(message, ToolListChangedNotification):
            self.note_change("tools")
        elif isinstance(message, ResourceListChangedNotification | PromptListChangedNotification):
            self.note_change("others")

    def note_change(self, what: str) -> None:
        self.changed.add(what)
        self.wake.set()

    def take_changes(self) -> set[str]:
        """What changed since the last call; the next wake waits for something new."""
        changed, self.changed = self.changed, set()
        self.wake = anyio.Event()
        return changed

    async def on_log(self, params: Any) -> None:
        level = _LEVELS.get(str(params.level), "info")
        line = one_line(params.data)
        if params.logger:
            line = f"{one_line(params.logger, 60)}: {line}"
        if len(self.calls) == 1:
            self.calls[0].add(f"{params.level}: {line}")
        if self._room():
            log.log(_level_number(level), "mcp.server_log", server=self.server, line=line)

    def _room(self) -> bool:
        """Whether one more line may be logged this second (the rest are counted, and
        the count logged with the next second's first line)."""
        now = anyio.current_time()
        if now - self._second >= 1.0:
            if self._unlogged:
                log.warning("mcp.server_log_dropped", server=self.server, lines=self._unlogged)
            self._second, self._logged, self._unlogged = now, 0, 0
        if self._logged >= LOG_LINES_PER_S:
            self._unlogged += 1
            return False
        self._logged += 1
        return True


def _level_number(name: str) -> int:
    import logging

    return int(logging.getLevelName(name.upper()))


async def listen_for_changes(client: Any, notices: ServerNotices) -> None:
    """Keep a 2026-07-28 server's ``subscriptions/listen`` stream open for the list
    changes it says it sends; each event wakes the watch loop. A stream that ends or
    drops is opened again after ``RELISTEN_S`` (and the lists re-read: nothing is
    replayed). Ends where the protocol has none (a 2025-era server sends them unasked)
    or the server refuses it: the periodic check still re-reads the tools."""
    from mcp import MCPError
    from mcp.client.subscriptions import ListenNotSupportedError
    from mcp.shared.subscriptions import ToolsListChanged

    caps = client.server_capabilities
    wanted = {
        "tools_list_changed": bool(caps.tools and caps.tools.list_changed),
        "resources_list_changed": bool(caps.resources and caps.resources.list_changed),
        "prompts_list_changed": bool(caps.prompts and caps.prompts.list_changed),
    }
    if not any(wanted.values()):
        return
    while True:
        try:
            async with client.listen(**wanted) as subscription:
                async for event in subscription:
                    kind = "tools" if isinstance(event, ToolsListChanged) else "others"
                    notices.note_change(kind)
        except (ListenNotSupportedError, MCPError) as exc:
            log.info("mcp.no_listen", server=notices.server, error=one_line(str(exc), 200))
            return
        except Exception as exc:  # the stream dropped (a read timeout, say)
            log.info("mcp.listen_lost", server=notices.server, error=one_line(str(exc), 200))
        await anyio.sleep(RELISTEN_S)
        notices.note_change("tools")
        notices.note_change("others")
