"""A running call's progress, as ``tool.progress`` events in its session's log.

A tool gets one callback on its context (``ToolContext.progress``: an MCP tool hands
it the server's ``notifications/progress``). :class:`ProgressReporter` is that
callback for one call. What it records is bounded whatever the tool says:

- at most one event per ``GAP_S`` per call: one that comes sooner replaces the one
  held back, and the last held back is recorded when the call returns (before its
  outcome: the driver records that after the reporter is closed), so a flood of
  notifications costs about one event a second;
- the message redacted (navi/log_redaction.py) and cut to
  ``TOOL_PROGRESS_MESSAGE_MAX`` characters; a value that is not a finite number is
  ignored (a ``total`` that is not positive is "not said");
- only while the call runs: between its ``tool.started`` and its outcome (a
  callback that comes later, or a call the session does not see running, records
  nothing).

The events are chunks (staged, not waited for): progress is news, never the call's
result. Recording one never fails the call: a refusal is logged and dropped.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import anyio
import structlog

from events.types import TOOL_PROGRESS_MESSAGE_MAX, Event, ToolProgress
from navi.log_redaction import redact_text

log = structlog.get_logger(__name__)

GAP_S = 1.0


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def bounded_message(text: object) -> str:
    """A tool's progress message as one redacted line of at most the event's limit."""
    if not isinstance(text, str) or not text:
        return ""
    line = " ".join(text[: TOOL_PROGRESS_MESSAGE_MAX * 4].split())
    line = redact_text(line)
    if len(line) > TOOL_PROGRESS_MESSAGE_MAX:
        line = line[: TOOL_PROGRESS_MESSAGE_MAX - 1] + "…"
    return line


class ProgressReporter:
    """``await reporter(progress, total, message)``: one call's progress callback."""

    def __init__(
        self,
        call_id: str,
        stage: Callable[[Event], Awaitable[None]],
        *,
        running: Callable[[str], bool] = lambda call_id: True,
        gap_s: float = GAP_S,
    ) -> None:
        self.call_id = call_id
        self._stage = stage
        self._running = running
        self._gap_s = gap_s
        self._last = -math.inf
        self._held: ToolProgress | None = None
        self._open = True
        self.recorded = 0
        self.dropped = 0

    async def __call__(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        if not self._open:
            return
        done = _number(progress)
        if done is None:
            self.dropped += 1
            return
        whole = _number(total)
        event = ToolProgress(
            call_id=self.call_id,
            progress=done,
            total=whole if whole is not None and whole > 0 else None,
            message=bounded_message(message),
        )
        now = anyio.current_time()
        if now - self._last < self._gap_s:
            if self._held is not None:
                self.dropped += 1
            self._held = event
            return
        self._last, self._held = now, None
        await self._record(event)

    async def close(self) -> None:
        """The call returned: the progress held back is recorded, nothing after it."""
        held, self._held = self._held, None
        self._open = False
        if held is not None:
            await self._record(held)

    def shut(self) -> None:
        """The call ended without returning (stopped, cancelled): nothing more."""
        self._open = False
        self._held = None

    async def _record(self, event: ToolProgress) -> None:
        if not self._running(self.call_id):
            self.dropped += 1
            return
        try:
            await self._stage(event)
            self.recorded += 1
        except Exception as exc:  # progress is news: never the call's failure
            self.dropped += 1
            log.info("tool.progress_dropped", call_id=self.call_id, error=str(exc)[:200])
