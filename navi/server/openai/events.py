"""A run's events → what an OpenAI client gets: pieces of the answer (``content``) and
of the thinking (``reasoning_content``) as they stream, the token usage, and how the
run ended.

Only the session's own stream is read: a subagent's text is its result, which reaches
the answer through the main agent, as in the web client. The text of every tool-loop
LLM call of the run streams (a call that ends in tool calls may say something first,
as the web client shows it); texts of successive calls are separated by a blank line.
What streamed is also what the conversation index recognises as the answer when a
client sends it back (history.py), next to the run's final answer alone, which
is the ``content`` of a non-streamed completion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from events.envelope import Recorded
from events.types import (
    LLMCompleted,
    LLMRequested,
    LLMText,
    LLMThinking,
    RunCompleted,
    RunFailed,
    RunStopped,
    ToolApprovalRequested,
    ToolStarted,
)
from navi.server.openai.wire import Usage

Ending = Literal["completed", "stopped", "failed"]


@dataclass(frozen=True)
class Piece:
    kind: Literal["content", "reasoning"]
    text: str


@dataclass
class RunReader:
    """Follows one run's events (``feed`` each record of the session's stream after the
    run began, in order) and remembers what a completion needs."""

    run_id: str
    usage: Usage = field(default_factory=Usage)
    ending: Ending | None = None
    answer: str = ""  # the run's final answer (run.completed), or what streamed if stopped
    error: str = ""
    acted: bool = False  # a tool of the run started: a retry would act again
    # Where a call that waits for approval is approved (the web client's session URL):
    # set, the stream says so in text ("" for a plain completion, which says nothing).
    approve_at: str = ""
    notes_as_reasoning: bool = False  # a JSON answer: the note goes to reasoning_content
    _streamed: list[str] = field(default_factory=list)
    _thinking: list[str] = field(default_factory=list)
    _purpose: str = "loop"
    # Whether the current LLM call has streamed text / thinking yet.
    _call_text: bool = False
    _call_thinking: bool = False

    @property
    def streamed(self) -> str:
        return "".join(self._streamed)

    @property
    def thinking(self) -> str:
        return "".join(self._thinking)

    def feed(self, record: Recorded) -> list[Piece]:
        if self.ending is not None:
            return []
        event = record.event
        if isinstance(event, LLMRequested):
            self._purpose = event.purpose
            if event.purpose == "loop":
                self._call_text = False
                self._call_thinking = False
            return []
        if isinstance(event, LLMThinking):
            if self._purpose != "loop" or not event.text:
                return []
            self._call_thinking = True
            return [self._reasoning(event.text)]
        if isinstance(event, LLMText):
            if self._purpose != "loop" or not event.text:
                return []
            piece = self._content(event.text)
            self._call_text = True
            return [piece]
        if isinstance(event, LLMCompleted):
            self.usage.prompt_tokens += event.prompt_tokens
            self.usage.completion_tokens += event.completion_tokens
            if self._purpose != "loop":
                return []
            # A backend that answered in one piece streamed nothing: send it now.
            out = []
            if event.thinking and not self._call_thinking:
                out.append(self._reasoning(event.thinking))
            if event.content and not self._call_text:
                out.append(self._content(event.content))
            self._call_text = self._call_thinking = True
            return out
        if record.run_id != self.run_id:
            return []
        if isinstance(event, ToolApprovalRequested):
            return self._waiting(event, record.stream_id)
        if isinstance(event, ToolStarted):
            self.acted = True
        elif isinstance(event, RunCompleted):
            self.ending = "completed"
            self.answer = event.content
        elif isinstance(event, RunStopped):
            self.ending = "stopped"
            self.answer = self.streamed
        elif isinstance(event, RunFailed):
            self.ending = "failed"
            self.error = event.error
        return []

    def _waiting(self, event: ToolApprovalRequested, session_id: str) -> list[Piece]:
        if not self.approve_at:
            return []
        what = event.summary or f"the call to {event.name}"
        note = (
            f"[Waiting for your approval: {what}. Approve or deny it in the web client at "
            f"{self.approve_at} or with `navi approvals {session_id}`; the answer goes on "
            "once it is decided.]"
        )
        if self.notes_as_reasoning:
            return [self._reasoning(note + "\n")]
        self._call_text = False  # the note is a paragraph of its own
        piece = self._content(note)
        self._call_text = False
        return [piece]

    def _reasoning(self, text: str) -> Piece:
        self._thinking.append(text)
        return Piece("reasoning", text)

    def _content(self, text: str) -> Piece:
        if not self._call_text and self._streamed:
            text = "\n\n" + text  # a new LLM call: its text starts a new paragraph
        self._streamed.append(text)
        return Piece("content", text)


def merged(pieces: list[Piece]) -> list[tuple[str, str]]:
    """Runs of pieces of one kind as one text: a commit's chunks become one SSE event
    per kind instead of one per token."""
    out: list[tuple[str, list[str]]] = []
    for piece in pieces:
        if out and out[-1][0] == piece.kind:
            out[-1][1].append(piece.text)
        else:
            out.append((piece.kind, [piece.text]))
    return [(kind, "".join(texts)) for kind, texts in out]
