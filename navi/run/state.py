"""The run state machine: one table ``(state, event kind) → state`` (h11's ``_state.py`` style).

A session's log drives it: every run-related event must be legal in the current state,
or ``transition`` raises ``IllegalTransition`` and nothing changes. Events that have
nothing to do with runs are listed in ``IGNORED``: they never change the state, and
that is said here, not left to a silent default. Every tag of ``events.types`` is either
in ``IGNORED`` or in the table's vocabulary ``KINDS`` (a test checks it), so a new event
type must be classified here before it can be recorded.

Two event types are split into *kinds*, because their meaning for the run depends on a
field: ``llm.requested`` by purpose (``llm.requested+plan``, ``+compress``, ``+memory``;
the plain kind is the tool loop) and ``llm.completed`` by whether the answer calls tools
(``llm.completed+tools``).

Design notes (also in docs/state-machine.md):

- A turn starts with ``user.message`` (resting state → ``idle``), then ``run.started``
  (``idle`` → ``awaiting_llm``). Planning and pre-turn compression are entered from
  ``awaiting_llm`` (``plan.status`` / ``llm.requested+plan`` / ``context.compressing``)
  and return to it.
- ``llm.failed`` always returns to ``awaiting_llm``: the decision to retry
  (``llm.requested`` with a higher attempt) or to give up (``run.failed``) is its own event.
- When the retries of a transient failure (server unreachable, timeout, dropped stream,
  5xx) are spent, ``llm.waiting`` leaves the run open in ``waiting_for_llm``: the next
  attempt (``llm.requested``) comes when the server answers again, on Try again, or after
  a restart; a stop ends it as anywhere else.
- An answer without tool calls leads to ``answered``; ``run.completed`` then ends the run.
- ``run.stopped`` is legal only in ``stopping``: a stop is always recorded first as
  ``stop.requested``. In ``stopping``, in-flight results may still land (chunks,
  ``llm.completed``, ``tool.completed``/``tool.failed``), but nothing new may start.
- ``tool.progress`` (a running call's progress) is legal where calls run: in
  ``executing_tools``, and in ``stopping`` while a call winds down. That it falls
  between its call's ``tool.started`` and outcome is a rule across events
  (projections/invariants.py), kept by its writer (navi/run/tool_progress.py).
- A tool call that needs a person's approval (navi/run/approval.py) is recorded as
  ``tool.approval_requested``: ``executing_tools`` → ``awaiting_approval``, where nothing
  happens but the decision (``tool.approval_decided`` → ``executing_tools``) or a stop.
  Calls run in the order the LLM gave them, so one call at a time waits.
- Post-turn compression runs after ``run.completed``: ``done`` → ``compressing_after_run``
  → ``done``. A ``user.message`` must wait until it ends (the session actor holds it).
  A recompression asked for at rest (``recompress``) may also start from ``stopped`` or
  ``failed``; it ends in ``done`` (a resting state like the others).
- LLM calls with purpose ``memory`` belong to the memory workers' own stream, never to a
  session's run: ``llm.requested+memory`` is legal in no state.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from events.envelope import Recorded
from events.types import EVENT_TYPES, Event, LLMCompleted, LLMRequested, tag_of


class RunState(StrEnum):
    IDLE = "idle"  # no run; a user message may be waiting for its run
    PLANNING = "planning"
    AWAITING_LLM = "awaiting_llm"  # preparing or waiting for the next LLM call
    WAITING_FOR_LLM = "waiting_for_llm"  # retries spent: until the model's server is back
    STREAMING = "streaming"
    EXECUTING_TOOLS = "executing_tools"
    AWAITING_APPROVAL = "awaiting_approval"  # a tool call waits for a person's decision
    ANSWERED = "answered"  # the final answer is in; run.completed comes next
    COMPRESSING = "compressing"  # inside a run, before an LLM call
    STOPPING = "stopping"
    DONE = "done"
    COMPRESSING_AFTER_RUN = "compressing_after_run"  # post-turn compression worker
    STOPPED = "stopped"
    FAILED = "failed"


# Tags that never change the state of a run, whatever the state.
IGNORED: frozenset[str] = frozenset(
    {
        "session.created",
        "session.pinned",
        "session.renamed",
        "session.deleted",
        "session.model_chosen",  # used by the next LLM call, never changes a run's state
        "note.saved",
        "note.deleted",
        # Settings live in the settings streams (``settings:<user>``), never in a run.
        "settings.updated",
        # Memory events live in the memory streams (``memory:<user>``), never in a run.
        "memory.fact_learned",
        "memory.fact_edited",
        "memory.fact_forgotten",
        "memory.summary_updated",
        "memory.session_processed",
        "memory.extraction_failed",
        "memory.reset",
    }
)

IDLE = RunState.IDLE
PLANNING = RunState.PLANNING
AWAITING_LLM = RunState.AWAITING_LLM
WAITING_FOR_LLM = RunState.WAITING_FOR_LLM
STREAMING = RunState.STREAMING
EXECUTING_TOOLS = RunState.EXECUTING_TOOLS
AWAITING_APPROVAL = RunState.AWAITING_APPROVAL
ANSWERED = RunState.ANSWERED
COMPRESSING = RunState.COMPRESSING
STOPPING = RunState.STOPPING
DONE = RunState.DONE
COMPRESSING_AFTER_RUN = RunState.COMPRESSING_AFTER_RUN
STOPPED = RunState.STOPPED
FAILED = RunState.FAILED

# fmt: off
TRANSITIONS: dict[RunState, dict[str, RunState]] = {
    IDLE: {
        "user.message":               IDLE,                   # a turn is pending
        "run.started":                AWAITING_LLM,
        "profile.switched":           IDLE,                   # chosen by the user between turns
    },
    AWAITING_LLM: {
        "context.injected":           AWAITING_LLM,
        "todo.updated":               AWAITING_LLM,           # todo filled from the plan
        "llm.requested":              AWAITING_LLM,
        "llm.failed":                 AWAITING_LLM,           # retry or run.failed comes next
        "llm.waiting":                WAITING_FOR_LLM,        # retries spent on a transient fault
        "llm.thinking":               STREAMING,
        "llm.text":                   STREAMING,
        "llm.tool_calls":             STREAMING,
        "llm.completed":              ANSWERED,               # a non-streamed answer
        "llm.completed+tools":        EXECUTING_TOOLS,
        "plan.status":                PLANNING,
        "llm.requested+plan":         PLANNING,
        "context.compressing":        COMPRESSING,            # pre-turn compression
        "run.completed":              DONE,                   # iteration budget spent
        "stop.requested":             STOPPING,
        "run.failed":                 FAILED,
    },
    WAITING_FOR_LLM: {
        # Nothing happens but the next attempt (the server is back, Try again, a
        # restart) or a stop.
        "llm.requested":              AWAITING_LLM,
        "stop.requested":             STOPPING,
        "run.failed":                 FAILED,                 # the run crashed
    },
    PLANNING: {
        "plan.status":                PLANNING,
        "llm.requested+plan":         PLANNING,
        "llm.thinking":               PLANNING,
        "llm.text":                   PLANNING,
        "llm.completed":              PLANNING,
        "llm.failed":                 PLANNING,
        "todo.updated":               PLANNING,
        "plan.ready":                 AWAITING_LLM,
        "llm.requested":              AWAITING_LLM,           # the planner said DIRECT: no plan
        "context.injected":           AWAITING_LLM,
        "stop.requested":             STOPPING,
        "run.failed":                 FAILED,
    },
    STREAMING: {
        "llm.thinking":               STREAMING,
        "llm.text":                   STREAMING,
        "llm.tool_calls":             STREAMING,
        "llm.completed":              ANSWERED,
        "llm.completed+tools":        EXECUTING_TOOLS,
        "llm.failed":                 AWAITING_LLM,
        "llm.requested":              AWAITING_LLM,           # an interrupted call is re-issued
        "stop.requested":             STOPPING,
        "run.failed":                 FAILED,
    },
    EXECUTING_TOOLS: {
        "tool.requested":             EXECUTING_TOOLS,
        "tool.started":               EXECUTING_TOOLS,
        "tool.progress":              EXECUTING_TOOLS,        # a running call's (chunk)
        "tool.completed":             EXECUTING_TOOLS,
        "tool.failed":                EXECUTING_TOOLS,
        "subagent.spawned":           EXECUTING_TOOLS,
        "subagent.finished":          EXECUTING_TOOLS,
        "profile.switched":           EXECUTING_TOOLS,
        "todo.updated":               EXECUTING_TOOLS,
        "scratchpad.updated":         EXECUTING_TOOLS,
        "context.injected":           EXECUTING_TOOLS,        # for the next LLM call
        "tool.approval_requested":    AWAITING_APPROVAL,
        "llm.requested":              AWAITING_LLM,           # next iteration
        "context.compressing":        COMPRESSING,
        "run.completed":              DONE,                   # iteration budget spent
        "stop.requested":             STOPPING,
        "run.failed":                 FAILED,
    },
    AWAITING_APPROVAL: {
        # One call waits; nothing else starts until a person decides (or a stop).
        "tool.approval_decided":      EXECUTING_TOOLS,
        "stop.requested":             STOPPING,
        "run.failed":                 FAILED,
    },
    ANSWERED: {
        "todo.updated":               ANSWERED,
        "run.completed":              DONE,
        "stop.requested":             STOPPING,
        "run.failed":                 FAILED,
    },
    COMPRESSING: {
        "llm.requested+compress":     COMPRESSING,
        "llm.thinking":               COMPRESSING,
        "llm.text":                   COMPRESSING,
        "llm.completed":              COMPRESSING,
        "llm.failed":                 COMPRESSING,
        "context.compressed":         AWAITING_LLM,
        "context.compression_failed": AWAITING_LLM,
        "stop.requested":             STOPPING,
        "run.failed":                 FAILED,
    },
    STOPPING: {
        # In-flight work may still land; nothing new may start.
        "stop.requested":             STOPPING,
        "llm.thinking":               STOPPING,
        "llm.text":                   STOPPING,
        "llm.tool_calls":             STOPPING,
        "llm.completed":              STOPPING,
        "llm.completed+tools":        STOPPING,
        "llm.failed":                 STOPPING,
        "tool.progress":              STOPPING,               # a call still running
        "tool.completed":             STOPPING,
        "tool.failed":                STOPPING,               # reason="stopped" for open calls
        "subagent.finished":          STOPPING,
        "profile.switched":           STOPPING,
        "todo.updated":               STOPPING,
        "scratchpad.updated":         STOPPING,
        "context.compressed":         STOPPING,
        "context.compression_failed": STOPPING,
        "run.stopped":                STOPPED,
        "run.completed":              DONE,                   # finished before the stop took
        "run.failed":                 FAILED,
    },
    DONE: {
        "user.message":               IDLE,
        "context.compressing":        COMPRESSING_AFTER_RUN,
        "profile.switched":           DONE,
    },
    COMPRESSING_AFTER_RUN: {
        "llm.requested+compress":     COMPRESSING_AFTER_RUN,
        "llm.thinking":               COMPRESSING_AFTER_RUN,
        "llm.text":                   COMPRESSING_AFTER_RUN,
        "llm.completed":              COMPRESSING_AFTER_RUN,
        "llm.failed":                 COMPRESSING_AFTER_RUN,
        "context.compressed":         DONE,
        "context.compression_failed": DONE,
    },
    STOPPED: {
        "user.message":               IDLE,
        "profile.switched":           STOPPED,
        "context.compressing":        COMPRESSING_AFTER_RUN,  # a recompression (recompress)
    },
    FAILED: {
        "user.message":               IDLE,
        "profile.switched":           FAILED,
        "context.compressing":        COMPRESSING_AFTER_RUN,  # a recompression (recompress)
    },
}
# fmt: on

INITIAL: RunState = RunState.IDLE
# States in which a run is going: a second user message must wait, a stop has an effect.
ACTIVE_STATES: frozenset[RunState] = frozenset(
    {
        PLANNING,
        AWAITING_LLM,
        WAITING_FOR_LLM,
        STREAMING,
        EXECUTING_TOOLS,
        AWAITING_APPROVAL,
        ANSWERED,
        COMPRESSING,
        STOPPING,
    }
)
# States in which a new turn may start.
RESTING_STATES: frozenset[RunState] = frozenset({IDLE, DONE, STOPPED, FAILED})

_DERIVED_KINDS = (
    "llm.requested+plan",
    "llm.requested+compress",
    "llm.requested+memory",
    "llm.completed+tools",
)
# Every kind the table speaks of: each run-related tag, plus the derived kinds.
KINDS: tuple[str, ...] = tuple(sorted((set(EVENT_TYPES) - IGNORED) | set(_DERIVED_KINDS)))


class IllegalTransition(Exception):
    """An event that the run state machine does not allow in its current state."""

    def __init__(self, state: RunState, kind: str, seq: int | None = None) -> None:
        self.state = state
        self.kind = kind
        self.seq = seq
        where = "" if seq is None else f" (seq {seq})"
        allowed = ", ".join(sorted(TRANSITIONS[state])) or "nothing"
        super().__init__(
            f"event {kind!r}{where} is not allowed in run state {state.value!r}; "
            f"allowed there: {allowed}"
        )


def event_kind(event: Event) -> str:
    """The key the table uses for ``event``: its tag, or a derived kind (see module doc)."""
    cls = type(event)
    if cls is LLMRequested:
        purpose = event.purpose  # type: ignore[attr-defined]
        return "llm.requested" if purpose == "loop" else f"llm.requested+{purpose}"
    if cls is LLMCompleted and event.tool_calls:  # type: ignore[attr-defined]
        return "llm.completed+tools"
    return tag_of(event)


def next_state(state: RunState, kind: str, *, seq: int | None = None) -> RunState:
    """The state after an event of ``kind``; raises ``IllegalTransition`` if not allowed."""
    if kind in IGNORED:
        return state
    target = TRANSITIONS[state].get(kind)
    if target is None:
        raise IllegalTransition(state, kind, seq)
    return target


def transition(state: RunState, event: Event) -> RunState:
    """Pure: the state after ``event``; raises ``IllegalTransition`` if not allowed."""
    return next_state(state, event_kind(event))


def state_at(
    records: Iterable[Recorded], *, until_seq: int | None = None, state: RunState = INITIAL
) -> RunState:
    """The run state after folding ``records`` (up to and including ``until_seq``).

    Used by resume and time-travel inspection. An illegal log raises ``IllegalTransition``
    naming the seq of the offending event.
    """
    for record in records:
        if until_seq is not None and record.seq > until_seq:
            break
        state = next_state(state, event_kind(record.event), seq=record.seq)
    return state


# ---------------------------------------------------------------- rendering


def _edges() -> list[tuple[RunState, RunState, list[str]]]:
    """Transitions grouped by (source, target), in table order."""
    grouped: dict[tuple[RunState, RunState], list[str]] = {}
    for source, row in TRANSITIONS.items():
        for kind, target in row.items():
            grouped.setdefault((source, target), []).append(kind)
    return [(source, target, kinds) for (source, target), kinds in grouped.items()]


def mermaid() -> str:
    """The table as a Mermaid ``stateDiagram-v2`` (one edge per source/target pair)."""
    lines = ["stateDiagram-v2", f"    [*] --> {INITIAL.value}"]
    for source, target, kinds in _edges():
        lines.append(f"    {source.value} --> {target.value} : {', '.join(kinds)}")
    return "\n".join(lines) + "\n"


def table_markdown() -> str:
    """The table as Markdown: one row per (state, target) with the kinds that lead there."""
    lines = ["| state | events | next state |", "|---|---|---|"]
    for source, target, kinds in _edges():
        events = ", ".join(f"`{kind}`" for kind in kinds)
        lines.append(f"| `{source.value}` | {events} | `{target.value}` |")
    ignored = ", ".join(f"`{tag}`" for tag in sorted(IGNORED))
    lines += ["", f"Ignored in every state (never change it): {ignored}."]
    return "\n".join(lines) + "\n"
