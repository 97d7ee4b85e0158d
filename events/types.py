"""Every event Navi records, as one tagged union of frozen msgspec Structs.

Tags are stable dotted names: they are stored in the log and must never change.
Schema evolution is additive (new optional fields with defaults); a breaking change
bumps ``schema_version`` and registers an upcaster in ``events.upcasting``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import msgspec

from events.event import (
    Chunk as Chunk,
)
from events.event import (
    Event as Event,
)
from events.event import (
    FileRef as FileRef,
)
from events.event import (
    ImageRef as ImageRef,
)
from events.event import (
    TodoItem as TodoItem,
)
from events.event import (
    ToolCall as ToolCall,
)
from events.memory_events import MemoryExtractionFailed as MemoryExtractionFailed
from events.memory_events import MemoryFactEdited as MemoryFactEdited
from events.memory_events import MemoryFactForgotten as MemoryFactForgotten
from events.memory_events import MemoryFactLearned as MemoryFactLearned
from events.memory_events import MemoryReset as MemoryReset
from events.memory_events import MemorySessionProcessed as MemorySessionProcessed
from events.memory_events import MemorySummaryUpdated as MemorySummaryUpdated
from events.settings_events import SettingsUpdated as SettingsUpdated

# ---------------------------------------------------------------- sessions


class SessionCreated(Event, frozen=True, kw_only=True, tag="session.created"):
    profile_id: str
    user_id: str = "local"
    title: str = ""
    # A subagent's stream names its parent; a fork names its origin and the seq it forked at.
    parent_stream_id: str | None = None
    parent_call_id: str | None = None
    forked_from: str | None = None
    forked_at_seq: int | None = None
    # A fork's stream holds a copy of its origin's events 2..forked_at_seq (navi/replay/
    # fork.py). False: a fork written before forks were copies (linked), which the
    # start-up upgrade copies (navi/replay/fork_upgrade.py).
    history_copied: bool = False
    # Where the chat was started: "" the web client or REST, "cli" a one-shot `navi chat
    # "…"`, "api" an OpenAI-compatible client (/v1). The sidebar groups the last two.
    origin: str = ""


class SessionPinned(Event, frozen=True, kw_only=True, tag="session.pinned"):
    pinned: bool


class SessionRenamed(Event, frozen=True, kw_only=True, tag="session.renamed"):
    title: str


class SessionDeleted(Event, frozen=True, kw_only=True, tag="session.deleted"):
    pass


class SessionModelChosen(Event, frozen=True, kw_only=True, tag="session.model_chosen"):
    """The model the chat's next runs use (the picker); "" is the profile's default."""

    model: str = ""


class UserMessage(Event, frozen=True, kw_only=True, tag="user.message"):
    # v1 (the original Navi's shape) had ``content`` and no files; see events.upcasting.
    # ``images``: references to the blob store; logs written before it hold base64
    # strings, which read as they are (a widened field: still v2, no rewrite).
    schema_version: ClassVar[int] = 2
    text: str
    images: tuple[str | ImageRef, ...] = ()
    files: tuple[FileRef, ...] = ()


# ---------------------------------------------------------------- runs


RunMode = Literal["stream", "run", "ephemeral"]


class CallOptions(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the caller asked of a run's tool-loop LLM calls (``/v1``: docs/api.md);
    unset: the profile's. ``response_format`` is the client's, as OpenAI spells it
    (``{"type": "json_object"}`` or ``{"type": "json_schema", "json_schema": {...}}``)."""

    temperature: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    response_format: dict[str, Any] | None = None


class RunStarted(Event, frozen=True, kw_only=True, tag="run.started"):
    profile_id: str
    profile_hash: str = ""
    model: str = ""
    backend: str = ""
    mode: RunMode = "stream"
    max_iterations: int = 50
    call_options: CallOptions | None = None


class PlanStatus(Event, frozen=True, kw_only=True, tag="plan.status"):
    phase: int
    label: str


class PlanReady(Event, frozen=True, kw_only=True, tag="plan.ready"):
    plan: str
    steps: tuple[str, ...] = ()


class ContextInjected(Event, frozen=True, kw_only=True, tag="context.injected"):
    """A message Navi put in front of the LLM (budget, goal anchor, anti-stall, image...)."""

    kind: str
    role: Literal["system", "user", "assistant"] = "system"
    content: str = ""
    images: tuple[str, ...] = ()


class LLMRequested(Event, frozen=True, kw_only=True, tag="llm.requested"):
    iteration: int = 0
    attempt: int = 1
    # How many attempts a failing call may make (NAVI_LLM_RETRIES + 1); 0: not said.
    max_attempts: int = 0
    purpose: Literal["loop", "plan", "compress", "memory"] = "loop"
    model: str = ""
    tools: tuple[str, ...] = ()
    options: dict[str, Any] = {}


class LLMThinking(Chunk, frozen=True, kw_only=True, tag="llm.thinking"):
    text: str


class LLMText(Chunk, frozen=True, kw_only=True, tag="llm.text"):
    text: str


class LLMToolCalls(Chunk, frozen=True, kw_only=True, tag="llm.tool_calls"):
    calls: tuple[ToolCall, ...]


class LLMCompleted(Event, frozen=True, kw_only=True, tag="llm.completed"):
    content: str = ""
    thinking: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LLMFailed(Event, frozen=True, kw_only=True, tag="llm.failed"):
    error: str
    kind: str = "error"
    retryable: bool = False


class LLMWaiting(Event, frozen=True, kw_only=True, tag="llm.waiting"):
    """The retries of a transient failure are spent: the run stays open and waits for
    the model's server (navi/run/decide.py); a Try again, the server answering again or
    a restart goes on with the next attempt (docs/llm.md, "When the server is away")."""

    error: str
    kind: str = "error"


class ToolRequested(Event, frozen=True, kw_only=True, tag="tool.requested"):
    call_id: str
    name: str
    arguments: dict[str, Any] = {}
    step: int = 0


class ToolStarted(Event, frozen=True, kw_only=True, tag="tool.started"):
    call_id: str
    name: str = ""


class ToolCompleted(Event, frozen=True, kw_only=True, tag="tool.completed"):
    call_id: str
    name: str
    output: str
    success: bool = True
    error: str | None = None
    metadata: dict[str, Any] = {}


class ToolProgress(Chunk, frozen=True, kw_only=True, tag="tool.progress"):
    """How far a running call has got, as its tool says (an MCP server's
    ``notifications/progress``: navi/run/tool_progress.py). Recorded only between the
    call's ``tool.started`` and its outcome, at most about one a second per call;
    ``message`` is redacted and at most ``TOOL_PROGRESS_MESSAGE_MAX`` characters.
    ``total`` None: the tool did not say. A chunk: staged, never waited for (the call
    goes on meanwhile), and never part of the LLM's context."""

    call_id: str
    progress: float = 0.0
    total: float | None = None
    message: str = ""


TOOL_PROGRESS_MESSAGE_MAX = 300


# "denied": the user or the approval policy declined the call, or no one decided within
# NAVI_APPROVAL_TIMEOUT (the error says which, in a sentence the LLM reads).
ToolFailureReason = Literal["error", "stopped", "interrupted", "timeout", "denied"]


class ToolFailed(Event, frozen=True, kw_only=True, tag="tool.failed"):
    call_id: str
    name: str
    reason: ToolFailureReason = "error"
    error: str = ""


ApprovalScope = Literal["once", "session"]


class ToolApprovalRequested(Event, frozen=True, kw_only=True, tag="tool.approval_requested"):
    """The call waits for a person: ``policy`` says which rule asked (navi/run/approval.py).

    What the person is shown, recorded as it was shown (added; empty in older logs):
    ``summary`` (one plain sentence), ``target`` (the resolved path, the URL's host and
    method, the profile entered…), ``risk`` (a sentence), ``asked_by`` (who asked, in
    plain words), and what "for this session" would approve: ``scope_key`` and its
    ``scope_label`` ("Allow file writes in this chat"). ``once_only``: the call can only
    be approved once. An older request (no ``scope_key``, not ``once_only``) offered the
    whole tool for the session, as it did then."""

    call_id: str
    name: str
    arguments: dict[str, Any] = {}
    policy: str = "ask"
    summary: str = ""
    target: str = ""
    risk: str = ""
    asked_by: str = ""
    scope_key: str = ""
    scope_label: str = ""
    once_only: bool = False


class ToolApprovalDecided(Event, frozen=True, kw_only=True, tag="tool.approval_decided"):
    """The answer to a ``tool.approval_requested``: ``by`` is the user who decided (or
    ``navi`` for a timeout); ``session`` scope approves what ``scope_key`` names for
    the rest of the session (the whole tool in logs written before it). ``imported``:
    the decision came in an imported log (navi/replay/import_.py sets it on every
    decision it writes): a person of another Navi, or nobody, took it, so it approves
    nothing here (a session scope does not carry to later runs)."""

    call_id: str
    approved: bool
    scope: ApprovalScope = "once"
    by: str = ""
    reason: str = ""
    imported: bool = False
    # What a ``session`` scope approved (added): the request's ``scope_key`` and
    # ``scope_label``. Empty with scope ``session`` (older logs): the whole tool.
    scope_key: str = ""
    scope_label: str = ""


class ContextCompressing(Event, frozen=True, kw_only=True, tag="context.compressing"):
    """Compression of older context began; ``context.compressed`` or
    ``context.compression_failed`` ends it (the run state machine needs the start marker)."""

    context_tokens: int = 0


class ContextCompressionFailed(Event, frozen=True, kw_only=True, tag="context.compression_failed"):
    """Compression gave up; the context stays as it was."""

    error: str


class ContextCompressed(Event, frozen=True, kw_only=True, tag="context.compressed"):
    """Older context from ``from_seq`` to ``to_seq`` (inclusive) is replaced by ``summary``."""

    from_seq: int
    to_seq: int
    summary: str
    model: str = ""
    messages_before: int = 0
    messages_after: int = 0
    supersedes_seq: int | None = None


class ProfileSwitched(Event, frozen=True, kw_only=True, tag="profile.switched"):
    profile_id: str
    profile_name: str = ""


class SubagentSpawned(Event, frozen=True, kw_only=True, tag="subagent.spawned"):
    child_stream_id: str
    call_id: str
    task: str
    profile_id: str = ""


class SubagentFinished(Event, frozen=True, kw_only=True, tag="subagent.finished"):
    child_stream_id: str
    call_id: str
    result: str = ""
    completed_normally: bool = True


class StopRequested(Event, frozen=True, kw_only=True, tag="stop.requested"):
    reason: str = "user"


class RunStopped(Event, frozen=True, kw_only=True, tag="run.stopped"):
    reason: str = "user"


class RunCompleted(Event, frozen=True, kw_only=True, tag="run.completed"):
    content: str = ""
    completed_normally: bool = True
    iterations: int = 0


class RunFailed(Event, frozen=True, kw_only=True, tag="run.failed"):
    error: str


# ---------------------------------------------------------------- session tool state


class TodoUpdated(Event, frozen=True, kw_only=True, tag="todo.updated"):
    items: tuple[TodoItem, ...]


class ScratchpadUpdated(Event, frozen=True, kw_only=True, tag="scratchpad.updated"):
    """The whole new content of one section (``None`` content clears it)."""

    section: str
    content: str | None = None


class NoteSaved(Event, frozen=True, kw_only=True, tag="note.saved"):
    note_id: str
    text: str


class NoteDeleted(Event, frozen=True, kw_only=True, tag="note.deleted"):
    note_id: str


AnyEvent = (
    SessionCreated
    | SessionPinned
    | SessionRenamed
    | SessionDeleted
    | SessionModelChosen
    | UserMessage
    | RunStarted
    | PlanStatus
    | PlanReady
    | ContextInjected
    | LLMRequested
    | LLMThinking
    | LLMText
    | LLMToolCalls
    | LLMCompleted
    | LLMFailed
    | LLMWaiting
    | ToolRequested
    | ToolStarted
    | ToolProgress
    | ToolCompleted
    | ToolFailed
    | ToolApprovalRequested
    | ToolApprovalDecided
    | ContextCompressing
    | ContextCompressionFailed
    | ContextCompressed
    | ProfileSwitched
    | SubagentSpawned
    | SubagentFinished
    | StopRequested
    | RunStopped
    | RunCompleted
    | RunFailed
    | TodoUpdated
    | ScratchpadUpdated
    | NoteSaved
    | NoteDeleted
    | SettingsUpdated
    | MemoryFactLearned
    | MemoryFactEdited
    | MemoryFactForgotten
    | MemorySummaryUpdated
    | MemorySessionProcessed
    | MemoryExtractionFailed
    | MemoryReset
)

EVENT_TYPES: dict[str, type[Event]] = {cls.__struct_config__.tag: cls for cls in AnyEvent.__args__}

TERMINAL_RUN_EVENTS: frozenset[str] = frozenset({"run.completed", "run.stopped", "run.failed"})


class Unreadable(Event, frozen=True, kw_only=True, tag="event.unreadable"):
    """Stands for a stored event that cannot be decoded (an unknown type, a corrupt
    payload) where the whole log is read (``read_all``, ``stream_heads``): one bad row
    must not stop every reader of every stream. Never written, and not in ``AnyEvent``:
    reading the stream itself still raises ``EventDecodeError``, so only its own session
    fails."""

    stored_type: str
    stored_version: int
    reason: str


# (A class's ``__struct_config__`` is built anew on every access: 4x a dict lookup.)
_TAGS: dict[type[Event], str] = {cls: tag for tag, cls in EVENT_TYPES.items()}


def tag_of(event: Event) -> str:
    tag = _TAGS.get(type(event))
    return type(event).__struct_config__.tag if tag is None else tag  # type: ignore[return-value]
