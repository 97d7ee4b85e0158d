"""How ``navi chat`` shows a turn's WebSocket frames.

On a terminal (rich): a live area at the bottom with a spinner and what the model is
doing ("waiting for the model" during a silent prefill, "thinking", "writing", a tool
name), the thinking dimmed and the answer as plain text while they stream; once a piece
is whole (thinking ended, a tool starts, the turn ends) it is printed above for good —
the thinking dimmed, the answer rendered as Markdown — and the live area is cleared.
Elsewhere (a pipe, a file): standard output gets the answer's text only, as it arrives
(``navi chat "…" > answer.md`` holds the answer, nothing else); the tool lines, the plan,
notes and errors go to standard error; no thinking, no colours, nothing redrawn.

Colours follow ``NO_COLOR`` (rich reads it) and are off when stdout is not a terminal.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner
from rich.text import Text

from navi.cli.common import plural

# Turn outcomes.
COMPLETED, STOPPED, FAILED = "completed", "stopped", "failed"


class ChatView:
    """One turn at a time: :meth:`begin`, :meth:`show` each frame until it returns an
    outcome, :meth:`end`."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.rich = console.is_terminal
        self._live: Live | None = None
        self._spinner = Spinner("dots")
        self._reset()

    def _reset(self) -> None:
        self.thinking = ""
        self.text = ""
        self.status = "waiting for the model"
        self.tool = "a tool"  # the call last started, for its progress on the status line
        self.failed = False
        self.started = False
        self._since = time.monotonic()

    # ---- a turn

    def begin(self) -> None:
        self._reset()
        self._start_live()

    def _start_live(self) -> None:
        if self.rich:
            self._live = Live(
                get_renderable=self._live_area,
                console=self.console,
                transient=True,
                refresh_per_second=12,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()

    def end(self) -> None:
        self._flush()
        if self._live is not None:
            self._live.stop()
            self._live = None

    def pause(self) -> None:
        """Print what is whole and take the live area away (a question is asked)."""
        self._flush()
        if self._live is not None:
            self._live.stop()
            self._live = None

    def resume(self) -> None:
        self._start_live()

    def note(self, text: str, style: str = "dim") -> None:
        """A line of Navi's own (stopping…, a retry), above the live area."""
        self._print(Text(text, style=style))

    def show(self, frame: dict[str, Any]) -> str | None:
        """Take one frame; the turn's outcome once it has ended."""
        kind = frame.get("type")
        sub = bool(frame.get("is_subagent"))
        if kind == "stream_start":
            self.started = True
        elif kind == "thinking_delta":
            self.thinking += frame.get("delta", "")
            self._status("thinking")
        elif kind == "thinking_end":
            self._flush_thinking()
            self._status("writing")
        elif kind == "stream_delta":
            self._flush_thinking()
            self._write_text(frame.get("delta", ""))
            self._status("writing")
        elif kind == "run_queued":
            self.note(f"queued ({frame.get('ahead', 0)} ahead): the server is busy")
            self._status("queued")
        elif kind == "run_dequeued":
            self._status("waiting for the model")
        elif kind == "stream_retry":
            self.thinking = self.text = ""
            self.note(f"the model's answer broke off: asking again (attempt {frame['attempt']})")
        elif kind == "tool_started":
            self._flush()
            self._tool_line(sub, f"⚙ {frame.get('tool')} {_short(frame.get('args'))}")
            self._status(f"running {frame.get('tool')}")
            self.tool = str(frame.get("tool") or "a tool")
        elif kind == "tool_progress":
            self._status(f"running {self.tool}: {_progress(frame)}")
        elif kind == "tool_call":
            mark = "✓" if frame.get("success") else "✗"
            self._tool_line(sub, f"  {mark} {_short(frame.get('result'))}")
            self._status("waiting for the model")
        elif kind == "approval_required":
            from navi.cli.approvals import describe

            self._flush()
            if self.rich:  # elsewhere the question, or how to decide, goes to stderr
                self.console.print(Text("\n".join(describe(frame)), style="yellow"))
            self._status(f"{frame.get('tool')} waits for approval")
        elif kind == "approval_decided":
            from navi.cli.approvals import decided_line

            self._tool_line(sub, decided_line(frame).strip())
            self._status("waiting for the tool")
        elif kind == "plan_ready" and not sub:
            self._flush()
            self._print(Text(f"plan:\n{frame.get('plan', '')}", style="dim"))
        elif kind == "context_compressed":
            self.note(
                f"(context compressed: {frame.get('messages_before')} → "
                f"{frame.get('messages_after')} messages)"
            )
        elif kind == "profile_switched":
            self.note(f"(profile: {frame.get('profile_name') or frame.get('profile_id')})")
        elif kind == "error":
            self._flush()
            self.failed = True
            self._print(Text(f"error: {frame.get('message')}", style="bold red"))
            if not self.started and not frame.get("fatal"):
                return FAILED  # refused before it began (a run already active…)
        elif kind == "stream_stopped":
            self._flush()
            self.note("[stopped]")
            return STOPPED
        elif kind == "stream_end":
            self._flush()
            self._stats(frame)
            return FAILED if self.failed else COMPLETED
        return None

    # ---- output

    def _print(self, renderable: RenderableType) -> None:
        if self.rich:
            self.console.print(renderable)
        else:
            self._plain(renderable.plain if isinstance(renderable, Text) else str(renderable))

    def _plain(self, text: str) -> None:
        """A line that is not the answer, without a terminal: on stderr."""
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
        sys.stderr.flush()

    def _write_text(self, delta: str) -> None:
        self.text += delta
        if not self.rich:  # a pipe gets the answer as it arrives
            self.console.file.write(delta)
            self.console.file.flush()

    def _flush_thinking(self) -> None:
        thinking, self.thinking = self.thinking.strip(), ""
        if thinking and self._live is not None:
            self._live.refresh()
        if thinking and self.rich:
            self.console.print(Text(thinking, style="dim italic"))

    def _flush(self) -> None:
        self._flush_thinking()
        text, self.text = self.text, ""
        if not text:
            return
        if self._live is not None:
            self._live.refresh()  # out of the live area before it is printed above it
        if self.rich:
            self.console.print(Markdown(text))
        elif not text.endswith("\n"):
            self.console.file.write("\n")
            self.console.file.flush()

    def _tool_line(self, sub: bool, text: str) -> None:
        self._print(Text(("  ↳ " if sub else "") + text, style="dim"))

    def _stats(self, frame: dict[str, Any]) -> None:
        parts = []
        if frame.get("elapsed_seconds") is not None:
            parts.append(f"{frame['elapsed_seconds']:.1f} s")
        if frame.get("token_count"):
            parts.append(plural(frame["token_count"], "token"))
        if frame.get("tool_call_count"):
            parts.append(plural(frame["tool_call_count"], "tool call"))
        if parts and self.rich:
            self.console.print(Text(" · ".join(parts), style="dim"))

    def _status(self, status: str) -> None:
        if status != self.status:
            self.status = status
            self._since = time.monotonic()

    def _live_area(self) -> RenderableType:
        budget = max(3, self.console.size.height - 3)
        parts: list[RenderableType] = []
        if self.thinking:
            parts.append(Text(_tail(self.thinking, self.console.width, budget), style="dim italic"))
        elif self.text:
            parts.append(Text(_tail(self.text, self.console.width, budget)))
        seconds = time.monotonic() - self._since
        label = f"{self.status}… {seconds:.0f} s" if seconds >= 1 else f"{self.status}…"
        self._spinner.update(text=Text(label, style="dim"))  # one spinner: it turns
        parts.append(self._spinner)
        return Group(*parts)


def _tail(text: str, width: int, rows: int) -> str:
    """The end of ``text`` that fits in ``rows`` terminal rows (the live area must never
    be taller than the screen: rich could not redraw what scrolled away)."""
    kept: list[str] = []
    used = 0
    for line in reversed(text.rstrip("\n").split("\n")):
        height = max(1, -(-len(line) // max(1, width)))
        if used + height > rows:
            break
        kept.append(line)
        used += height
    return "\n".join(reversed(kept))


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _progress(frame: dict[str, Any]) -> str:
    """A running call's progress as the status line says it: "3/8 · linking"."""
    done, total = frame.get("progress"), frame.get("total")
    if not isinstance(done, int | float):
        return "…"
    amount = f"{done:g}/{total:g}" if isinstance(total, int | float) else f"{done:g}"
    message = str(frame.get("message") or "")[:80]
    return amount + (f" · {message}" if message else "")
