"""The tool contract: what every tool is, and what a call gives back."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from events.types import ToolFailureReason

if TYPE_CHECKING:
    from tools.context import ToolContext

# The LLM sees at most this many characters of one tool result unless a tool caps lower.
DEFAULT_OUTPUT_CAP = 20_000

# A tool call's approval policy (navi/run/approval.py).
Approval = Literal["auto", "ask", "deny"]
APPROVALS: tuple[Approval, ...] = ("auto", "ask", "deny")


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a tool call gives back. ``output`` is always a string: it is what the LLM reads."""

    success: bool
    output: str = ""
    error: str | None = None
    # Internal hints for Navi, never shown to the LLM as text (e.g. ``is_image`` + ``base64``).
    metadata: dict[str, Any] = {}
    # Why a call failed, in the terms of ``tool.failed`` events; None for a tool's own error.
    failure_reason: ToolFailureReason | None = None


def ok(output: str, **metadata: Any) -> ToolResult:
    return ToolResult(success=True, output=output, metadata=metadata)


def fail(
    error: str,
    output: str = "",
    *,
    reason: ToolFailureReason | None = None,
    **metadata: Any,
) -> ToolResult:
    return ToolResult(
        success=False,
        output=output or f"Error: {error}",
        error=error,
        metadata=metadata,
        failure_reason=reason,
    )


def truncation_marker(omitted: int, unit: str = "characters") -> str:
    return f"\n[... output truncated: {omitted} more {unit}]"


def cap_output(text: str, limit: int = DEFAULT_OUTPUT_CAP) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + truncation_marker(len(text) - limit)


# A tool that capped its own output to ``limit`` added a marker; the backstop leaves it be.
MARKER_ROOM = 200


def cap_result(result: ToolResult, limit: int) -> ToolResult:
    """The registry's backstop cap, for tools (user tools too) that do not cap themselves."""
    if len(result.output) <= limit + MARKER_ROOM:
        return result
    return msgspec.structs.replace(result, output=cap_output(result.output, limit))


class SessionScope(msgspec.Struct, frozen=True):
    """What "approve for this session" covers for a call (navi/run/approval.py): ``key``,
    recorded in the log, and ``allows``, the button's words without the where ("Allow
    file writes"; Navi adds "in this chat")."""

    key: str
    allows: str


class Reach(msgspec.Struct, frozen=True):
    """An outbound request a call makes: Navi asks before one goes to a host the user
    has not allowed in the chat. ``reads``: a plain read (GET or HEAD without a body)."""

    url: str
    method: str = "GET"
    reads: bool = True


class CallDescription(msgspec.Struct, frozen=True, kw_only=True):
    """A call in plain words, as the approval card shows it (``Tool.describe``).

    ``summary``: one sentence ("Write the file /data/files/…/notes.txt"); ``target``: what
    it acts on, resolved (an absolute path, ``GET example.com``, a profile's name);
    ``risk``: what could happen, in a sentence; ``default_asker``: who asks when the
    tool's own default asks ("Navi asks before file changes"); ``scope``: what approving
    it for the session covers, None when it can be approved only once; ``reach``: the
    outbound requests it makes (their hosts decide the scope instead)."""

    summary: str
    target: str = ""
    risk: str = ""
    default_asker: str = ""
    scope: SessionScope | None = None
    reach: tuple[Reach, ...] = ()


def shorten(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut to ``limit`` characters (for a summary sentence; the
    card shows the arguments whole)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def default_description(name: str) -> CallDescription:
    """A call of ``name`` described by the tool's name alone: "for this session" covers
    every call of the tool."""
    return CallDescription(
        summary=f"Run the tool {name} with the arguments shown",
        target=name,
        risk=f"{name} does whatever its code does with these arguments",
        default_asker=f"Navi asks before {name} runs",
        scope=SessionScope(name, f"Allow every {name} call"),
    )


class ToolError(Exception):
    """A failure a tool reports on purpose: its message goes to the LLM as is."""


class Tool(abc.ABC):
    """A tool the LLM can call.

    Subclasses set the class attributes and implement :meth:`call`. ``call`` gets
    arguments already validated against ``parameters``. Raising :class:`ToolError`
    (or any exception) makes the call a failed one; it never stops the run.
    """

    name: str
    description: str
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    # Safe to run again after a crash left the call without a result (resume).
    idempotent: bool = False
    # Works in the session's files folder, which must then exist when it is called (the
    # run makes it, checking before each call). A tool that never touches it says so
    # and saves that check: it is a system call on every iteration of the loop.
    uses_files: bool = True
    timeout_s: float = 60.0
    # Whether a person approves a call first (navi/run/approval.py): "auto" runs at once,
    # "ask" waits for the user, "deny" never runs. Tools that act on the machine ask.
    approval: Approval = "auto"
    # Python modules the tool imports when it runs (its third-party libraries). The
    # registry imports them once when the tool is registered: if one is missing or
    # broken, that tool is unavailable, with the error as the reason (navi doctor and the
    # start-up log say so), and the server starts all the same.
    requires: tuple[str, ...] = ()

    @abc.abstractmethod
    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult: ...

    def is_idempotent(self, args: dict[str, Any]) -> bool:
        """Whether this particular call may be re-run; tools whose actions differ override it."""
        return self.idempotent

    def approval_for(self, args: dict[str, Any]) -> Approval:
        """This call's default approval; tools whose actions differ override it."""
        return self.approval

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        """This call in plain words for the person who approves it (``CallDescription``).
        The default names the tool and lets "for this session" cover every call of it;
        tools whose calls differ in what they do or where they reach override it."""
        return default_description(self.name)

    def timeout_for(self, args: dict[str, Any]) -> float:
        """The registry's hard limit for this call (a ``timeout_s`` argument may widen it)."""
        return self.timeout_s
