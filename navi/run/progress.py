"""Where the current run stands, beyond its state: a pure fold of the session log that
the run's decision table (navi/run/decide.py) reads with the run state. A fresh run and
a run resumed after a crash are the same thing to the driver: it looks at both and does
what comes next.

The progress keeps only what the state does not say: whether the run is over, stopping,
streaming or answered is the state's business (navi/run/state.py), not a field here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
from msgspec.structs import replace

from events.envelope import Recorded
from events.types import (
    CallOptions,
    ContextInjected,
    Event,
    LLMCompleted,
    LLMFailed,
    LLMRequested,
    PlanReady,
    PlanStatus,
    RunStarted,
    SubagentFinished,
    SubagentSpawned,
    TodoItem,
    TodoUpdated,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCall,
    ToolCompleted,
    ToolFailed,
    ToolRequested,
    ToolStarted,
)

# llm.failed's kind when the model does not think: the call is asked again without it.
THINKING_NOT_SUPPORTED = "thinking_not_supported"


class PlanResult(msgspec.Struct, frozen=True, kw_only=True):
    """The recorded answer of one planning phase (``failed``: the call failed)."""

    phase: int
    content: str = ""
    failed: bool = False


class RunProgress(msgspec.Struct, frozen=True, kw_only=True):
    # What run.started said.
    run_id: str | None = None
    started_seq: int = 0
    profile_id: str = ""
    mode: str = "stream"
    backend: str = ""
    max_iterations: int = 50
    call_options: CallOptions | None = None  # what the caller asked of the loop's calls
    # The tool loop's LLM calls.
    iterations: int = 0  # tool-loop LLM calls requested so far
    attempt: int = 0  # attempt number of the current iteration's LLM call
    # An llm.requested (tool loop) without its outcome. The state says ``streaming``
    # once chunks come; before the first one it says ``awaiting_llm``, as it does
    # before the call is made: only this field tells the two apart.
    llm_open: bool = False
    failures: int = 0  # llm.failed in a row for the current iteration
    last_error: str = ""
    last_kind: str = ""  # llm.failed's kind
    retryable: bool = False  # the last failure may be retried (llm.failed's own word)
    think_off: bool = False  # the model refused thinking in this run: ask without it
    answer: str = ""  # the text of the last answer (what run.completed repeats)
    calls: tuple[ToolCall, ...] = ()  # the tool calls of the last answer, in order
    requested: tuple[ToolCall, ...] = ()  # their tool.requested, in order
    resolved: frozenset[str] = frozenset()  # call ids with tool.completed / tool.failed
    started: frozenset[str] = frozenset()  # call ids with tool.started (may have run)
    # Approvals (navi/run/approval.py): the call waiting for a person, and when it began
    # to wait; the decisions of this step's calls; the tools older logs approved as a
    # whole for the session (kept across runs; never by a decision of an imported log).
    awaiting: ToolApprovalRequested | None = None
    awaiting_since: float = 0.0
    decisions: tuple[ToolApprovalDecided, ...] = ()
    approved_tools: frozenset[str] = frozenset()
    # The todo list and the injections (navi/run/injections.py).
    failed_steps: frozenset[int] = frozenset()  # todo ids seen failed during this run
    todo_done: int = 0
    stall: int = 0  # iterations since the todo list last made progress
    last_anchor: int = 0  # the iteration of the last goal anchor
    replanned: int = 0  # how many failed steps the last re-plan prompt covered
    # Planning and compression calls ("plan" / "compress") are not tool-loop calls.
    side_call: str = ""
    plan_phase: int = 0  # the phase of the last plan.status
    plan_results: tuple[PlanResult, ...] = ()  # planning answers recorded in this run
    plan_ready: bool = False
    # subagent.spawned / subagent.finished of this run, by tool call id.
    subagents: tuple[SubagentSpawned, ...] = ()
    subagents_finished: tuple[SubagentFinished, ...] = ()

    def plan_result(self, phase: int) -> PlanResult | None:
        return next((r for r in self.plan_results if r.phase == phase), None)

    def decision_of(self, call_id: str) -> ToolApprovalDecided | None:
        return next((d for d in self.decisions if d.call_id == call_id), None)

    def subagent_of(self, call_id: str) -> SubagentSpawned | None:
        return next((s for s in self.subagents if s.call_id == call_id), None)

    def subagent_finished(self, call_id: str) -> SubagentFinished | None:
        return next((s for s in self.subagents_finished if s.call_id == call_id), None)

    @property
    def open_calls(self) -> list[ToolCall]:
        return [c for c in self.requested if c.id not in self.resolved]

    @property
    def unrequested_calls(self) -> list[ToolCall]:
        """Calls the last answer asked for that have no ``tool.requested`` yet."""
        if len(self.requested) == len(self.calls):
            return []
        have = {c.id for c in self.requested}
        return [c for c in self.calls if c.id not in have]


def _done_count(items: tuple[TodoItem, ...]) -> int:
    return sum(1 for item in items if item.status in ("done", "skipped"))


def _run_started(p: RunProgress, record: Recorded, e: RunStarted) -> RunProgress:
    return RunProgress(
        run_id=record.run_id,
        started_seq=record.seq,
        profile_id=e.profile_id,
        mode=e.mode,
        backend=e.backend,
        max_iterations=e.max_iterations,
        call_options=e.call_options,
        todo_done=p.todo_done,
        failed_steps=p.failed_steps,
        replanned=p.replanned,
        approved_tools=p.approved_tools,
    )


def _llm_requested(p: RunProgress, record: Recorded, e: LLMRequested) -> RunProgress:
    if e.purpose != "loop":
        return replace(p, side_call=e.purpose)
    if e.iteration > p.iterations:  # a new iteration, not a retry
        return replace(
            p,
            iterations=e.iteration,
            attempt=e.attempt,
            llm_open=True,
            failures=0,
            answer="",
            calls=(),
            requested=(),
            resolved=frozenset(),
            started=frozenset(),
            decisions=(),
            stall=p.stall + 1,
            side_call="",
        )
    return replace(p, attempt=e.attempt, llm_open=True, side_call="")


def _llm_completed(p: RunProgress, record: Recorded, e: LLMCompleted) -> RunProgress:
    if p.side_call == "plan":
        result = PlanResult(phase=p.plan_phase, content=e.content)
        return replace(p, side_call="", plan_results=(*p.plan_results, result))
    if p.side_call:
        return replace(p, side_call="")
    if not p.llm_open:
        return p
    # An answer ends the run of failures: the next call is the next iteration, not one
    # more attempt at this one.
    return replace(p, llm_open=False, failures=0, answer=e.content, calls=e.tool_calls)


def _llm_failed(p: RunProgress, record: Recorded, e: LLMFailed) -> RunProgress:
    if p.side_call == "plan":
        result = PlanResult(phase=p.plan_phase, content=e.error, failed=True)
        return replace(p, side_call="", plan_results=(*p.plan_results, result))
    if p.side_call:
        return replace(p, side_call="")
    return replace(
        p,
        llm_open=False,
        failures=p.failures + 1,
        last_error=e.error,
        last_kind=e.kind,
        retryable=e.retryable or e.kind == THINKING_NOT_SUPPORTED,
        think_off=p.think_off or e.kind == THINKING_NOT_SUPPORTED,
    )


def _tool_requested(p: RunProgress, record: Recorded, e: ToolRequested) -> RunProgress:
    call = ToolCall(id=e.call_id, name=e.name, arguments=e.arguments)
    return replace(p, requested=(*p.requested, call))


def _tool_started(p: RunProgress, record: Recorded, e: ToolStarted) -> RunProgress:
    return replace(p, started=p.started | {e.call_id})


def _tool_resolved(p: RunProgress, record: Recorded, e: ToolCompleted | ToolFailed) -> RunProgress:
    awaiting = None if p.awaiting is not None and p.awaiting.call_id == e.call_id else p.awaiting
    return replace(p, resolved=p.resolved | {e.call_id}, awaiting=awaiting)


def _approval_requested(p: RunProgress, record: Recorded, e: ToolApprovalRequested) -> RunProgress:
    return replace(p, awaiting=e, awaiting_since=record.timestamp)


def _approval_decided(p: RunProgress, record: Recorded, e: ToolApprovalDecided) -> RunProgress:
    # A decision that came in an imported log was not taken by a person of this Navi
    # (the file may say anything): it approves no tool for the session's later runs.
    # One with a scope key approves that scope (projections/consent.py); only an older
    # one, without a key, approves the whole tool.
    approved = p.approved_tools
    legacy = e.scope == "session" and not e.scope_key
    if e.approved and legacy and not e.imported and p.awaiting is not None:
        approved = approved | {p.awaiting.name}
    return replace(p, awaiting=None, decisions=(*p.decisions, e), approved_tools=approved)


def _todo_updated(p: RunProgress, record: Recorded, e: TodoUpdated) -> RunProgress:
    done = _done_count(e.items)
    failed = frozenset(i.id for i in e.items if i.status == "failed")
    progressed = done > p.todo_done
    if all(i.status == "pending" for i in e.items):
        # A fresh list (a new plan): the failures of the old one are history.
        return replace(p, todo_done=0, failed_steps=frozenset(), replanned=0)
    return replace(
        p,
        todo_done=done,
        stall=0 if progressed else p.stall,
        failed_steps=p.failed_steps | failed,
    )


def _injected(p: RunProgress, record: Recorded, e: ContextInjected) -> RunProgress:
    if e.kind == "goal_anchor":
        return replace(p, last_anchor=p.iterations)
    if e.kind == "replan":
        return replace(p, replanned=len(p.failed_steps))
    return p


def _plan_status(p: RunProgress, record: Recorded, e: PlanStatus) -> RunProgress:
    return replace(p, plan_phase=e.phase)


def _plan_ready(p: RunProgress, record: Recorded, e: PlanReady) -> RunProgress:
    return replace(p, plan_ready=True)


def _subagent_spawned(p: RunProgress, record: Recorded, e: SubagentSpawned) -> RunProgress:
    return replace(p, subagents=(*p.subagents, e))


def _subagent_finished(p: RunProgress, record: Recorded, e: SubagentFinished) -> RunProgress:
    return replace(p, subagents_finished=(*p.subagents_finished, e))


Fold = Callable[[RunProgress, Recorded, Any], RunProgress]

# The fold, by event type: a run folds five events per iteration, and a chain of
# isinstance checks cost more than the replace itself (event types are final). The
# types missing here leave the progress as it is.
FOLDS: Mapping[type[Event], Fold] = {
    RunStarted: _run_started,
    LLMRequested: _llm_requested,
    LLMCompleted: _llm_completed,
    LLMFailed: _llm_failed,
    ToolRequested: _tool_requested,
    ToolStarted: _tool_started,
    ToolCompleted: _tool_resolved,
    ToolFailed: _tool_resolved,
    ToolApprovalRequested: _approval_requested,
    ToolApprovalDecided: _approval_decided,
    TodoUpdated: _todo_updated,
    ContextInjected: _injected,
    PlanStatus: _plan_status,
    PlanReady: _plan_ready,
    SubagentSpawned: _subagent_spawned,
    SubagentFinished: _subagent_finished,
}


def evolve(p: RunProgress, record: Recorded) -> RunProgress:
    event = record.event
    fold = FOLDS.get(type(event))
    return p if fold is None else fold(p, record, event)


INITIAL = RunProgress()


class CallOrderError(RuntimeError):
    """A tool call's start or outcome about to be written before its ``tool.requested``:
    a bug in the writer of the run, refused so that the log never shows it."""


def check_call_order(progress: RunProgress, events: Sequence[Event]) -> None:
    """Raise :class:`CallOrderError` if ``events`` start or settle a call that neither
    ``progress`` nor an earlier event of ``events`` has requested. (Checked where events
    are written, not where logs are read: an older log keeps its order.)"""
    requested = {c.id for c in progress.requested}
    for event in events:
        if isinstance(event, ToolRequested):
            requested.add(event.call_id)
        elif (
            isinstance(event, ToolStarted | ToolCompleted | ToolFailed)
            and event.call_id not in requested
        ):
            raise CallOrderError(
                f"{type(event).__name__} of call {event.call_id} comes before its tool.requested"
            )
