"""A run's events in the terminal: how ``navi replay`` shows a recorded run (thinking
dimmed, the answer as it streams, tool calls and their results on their own lines).
``navi chat``, a client of the server, shows its frames with navi.cli.chat_view."""

from __future__ import annotations

import os
from typing import TextIO

from events.types import (
    Event,
    LLMText,
    LLMThinking,
    LLMWaiting,
    RunCompleted,
    RunFailed,
    RunStopped,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCompleted,
    ToolFailed,
    ToolRequested,
    UserMessage,
)

DIM = "\033[2m"
BOLD = "\033[1m"
RESET = "\033[0m"


class RunPrinter:
    """Prints events one by one. ``show_user``: print user messages too (a replay shows
    the question). ``color``: by default on a terminal unless ``NO_COLOR`` is set."""

    def __init__(self, out: TextIO, *, color: bool | None = None, show_user: bool = False):
        self.out = out
        if color is None:
            color = out.isatty() and not os.environ.get("NO_COLOR")
        self.color = color
        self.show_user = show_user
        self._thinking = False

    def _write(self, text: str, style: str = "") -> None:
        self.out.write(f"{style}{text}{RESET}" if self.color and style else text)
        self.out.flush()

    def show(self, event: Event) -> None:
        if isinstance(event, LLMThinking):
            self._thinking = True
            self._write(event.text, DIM)
            return
        if self._thinking:
            self._write("\n")
            self._thinking = False
        if isinstance(event, UserMessage) and self.show_user:
            self._write(f"> {event.text}\n", BOLD)
        elif isinstance(event, LLMText):
            self._write(event.text)
        elif isinstance(event, ToolRequested):
            self._write(f"\n⚙ {event.name} {event.arguments}\n", DIM)
        elif isinstance(event, ToolApprovalRequested):
            asked = f"asked by {event.asked_by}" if event.asked_by else f"policy: {event.policy}"
            what = f"{event.summary}; " if event.summary else ""
            self._write(f"  ⏸ waits for approval ({what}{asked})\n", DIM)
        elif isinstance(event, ToolApprovalDecided):
            verdict = "approved" if event.approved else "denied"
            scope = ""
            if event.approved and event.scope == "session":
                scope = f" ({event.scope_label})" if event.scope_label else " for the session"
            reason = f": {event.reason}" if event.reason else ""
            self._write(f"  {verdict}{scope} by {event.by or '?'}{reason}\n", DIM)
        elif isinstance(event, ToolCompleted):
            self._write(f"  ✓ {event.output[:200]}\n", DIM)
        elif isinstance(event, ToolFailed):
            self._write(f"  ✗ {event.error[:200]}\n", DIM)
        elif isinstance(event, LLMWaiting):
            self._write(
                f"\n⏳ {event.error}\n  Navi goes on when the model's server is back.\n", DIM
            )
        elif isinstance(event, RunFailed):
            self._write(f"\nerror: {event.error}\n", BOLD)
        elif isinstance(event, RunStopped):
            self._write("\n[stopped]\n", DIM)
        elif isinstance(event, RunCompleted):
            self._write("\n")
