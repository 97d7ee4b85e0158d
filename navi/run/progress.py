"""Where the current run stands: a pure fold of the session log that the run driver
reads to decide its next step. A fresh run and a run resumed after a crash are the
same thing to the driver: it looks at the progress and does what comes next.
"""

from __future__ import annotations

import msgspec

from events.envelope import Recorded
from events.types import (
    ContextInjected,
    LLMCompleted,
    LLMFailed,
    LLMRequested,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunStopped,
    StopRequested,
    TodoItem,
    TodoUpdated,
    ToolCall,
    ToolCompleted,
    ToolFailed,
    ToolRequested,
)


class RunProgress(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str | None = None
    started_seq: int = 0
    profile_id: str = ""
    mode: str = "stream"
    max_iterations: int = 50
    iterations: int = 0  # tool-loop LLM calls requested so far
    attempt: int = 0  # attempt number of the current iteration's LLM call
    llm_open: bool = False  # an llm.requested (tool loop) without its completion
    failures: int = 0  # llm.failed in a row for the current iteration
    last_error: str = ""
    last_completion: LLMCompleted | None = None
    requested: tuple[ToolCall, ...] = ()  # tool.requested of the last completion, in order
    resolved: frozenset[str] = frozenset()  # call ids with tool.completed / tool.failed
    failed_steps: frozenset[int] = frozenset()  # todo ids seen failed during this run
    todo_done: int = 0
    stall: int = 0  # iterations since the todo list last made progress
    last_anchor: int = 0  # the iteration of the last goal anchor
    replanned: int = 0  # how many failed steps the last re-plan prompt covered
    stop_requested: bool = False
    tool_calls_made: int = 0
    completion_tokens: int = 0
    ended: bool = False

    @property
    def open_calls(self) -> list[ToolCall]:
        return [c for c in self.requested if c.id not in self.resolved]

    @property
    def unrequested_calls(self) -> list[ToolCall]:
        """Calls the last completion asked for that have no ``tool.requested`` yet."""
        if self.last_completion is None:
            return []
        have = {c.id for c in self.requested}
        return [c for c in self.last_completion.tool_calls if c.id not in have]


def _done_count(items: tuple[TodoItem, ...]) -> int:
    return sum(1 for item in items if item.status in ("done", "skipped"))


def evolve(p: RunProgress, record: Recorded) -> RunProgress:
    e = record.event
    replace = msgspec.structs.replace
    if isinstance(e, RunStarted):
        return RunProgress(
            run_id=record.run_id,
            started_seq=record.seq,
            profile_id=e.profile_id,
            mode=e.mode,
            max_iterations=e.max_iterations,
            todo_done=p.todo_done,
            failed_steps=p.failed_steps,
            replanned=p.replanned,
        )
    if isinstance(e, LLMRequested):
        if e.purpose != "loop":
            return p
        if e.iteration > p.iterations:  # a new iteration, not a retry
            return replace(
                p,
                iterations=e.iteration,
                attempt=e.attempt,
                llm_open=True,
                failures=0,
                last_completion=None,
                requested=(),
                resolved=frozenset(),
                stall=p.stall + 1,
            )
        return replace(p, attempt=e.attempt, llm_open=True)
    if isinstance(e, LLMCompleted):
        if not p.llm_open:
            return p  # a planning / compression call
        return replace(
            p,
            llm_open=False,
            last_completion=e,
            completion_tokens=p.completion_tokens + e.completion_tokens,
        )
    if isinstance(e, LLMFailed):
        return replace(p, llm_open=False, failures=p.failures + 1, last_error=e.error)
    if isinstance(e, ToolRequested):
        call = ToolCall(id=e.call_id, name=e.name, arguments=e.arguments)
        return replace(p, requested=(*p.requested, call), tool_calls_made=p.tool_calls_made + 1)
    if isinstance(e, ToolCompleted | ToolFailed):
        return replace(p, resolved=p.resolved | {e.call_id})
    if isinstance(e, TodoUpdated):
        done = _done_count(e.items)
        failed = frozenset(i.id for i in e.items if i.status == "failed")
        progressed = done > p.todo_done
        return replace(
            p,
            todo_done=done,
            stall=0 if progressed else p.stall,
            failed_steps=p.failed_steps | failed,
        )
    if isinstance(e, ContextInjected) and e.kind == "goal_anchor":
        return replace(p, last_anchor=p.iterations)
    if isinstance(e, ContextInjected) and e.kind == "replan":
        return replace(p, replanned=len(p.failed_steps))
    if isinstance(e, StopRequested):
        return replace(p, stop_requested=True)
    if isinstance(e, RunCompleted | RunStopped | RunFailed):
        return replace(p, ended=True, llm_open=False)
    return p


INITIAL = RunProgress(ended=True)
