"""What every session log holds, whatever happened in it: one pure check over a log.

The run state machine (navi/run/state.py) says which event may follow which *state*;
these are the rules across events that it cannot see one event at a time:

- seqs are dense: each record's seq is the one before plus one;
- (a fork made before forks were copies and left linked goes on from its origin's
  history, maybe inside a run: that history is not in its log, so the calls and the end
  of a run open there are taken as they come; a fork's copy holds it, and is checked);
- a tool call starts and settles only after its ``tool.requested`` in the same run, and
  settles (``tool.completed`` / ``tool.failed``) at most once;
- a call's progress (``tool.progress``) comes after its ``tool.started`` and before its
  outcome;
- a decision (``tool.approval_decided``) answers a call that waits: one asked about and
  not yet decided;
- a run ends once: no run event outside a run, no second end, and a new run starts
  only after the last one ended (a log may end with a run still open: a crash, or a
  call that waits for a person).

The test suite checks every log its in-process Navis write (tests/support/navi_app.py)
and logs of generated runs (tests/projections/test_invariants.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from events.envelope import Recorded
from events.types import (
    TERMINAL_RUN_EVENTS,
    RunStarted,
    SessionCreated,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCompleted,
    ToolFailed,
    ToolProgress,
    ToolRequested,
    ToolStarted,
)

__all__ = ["log_problems"]


class _Run:
    """What the check keeps of the run in progress."""

    def __init__(self, run_id: str | None, *, seen: bool = True) -> None:
        self.run_id = run_id
        self.seen = seen  # False: begun in a fork's origin, before this log
        self.requested: set[str] = set()
        self.started: set[str] = set()
        self.settled: set[str] = set()
        self.waiting: set[str] = set()


def log_problems(records: Iterable[Recorded]) -> list[str]:
    """Each broken rule of the module's doc, as a sentence naming the seq; [] if none."""
    problems: list[str] = []
    previous: int | None = None
    run: _Run | None = None
    for record in records:
        where = f"seq {record.seq} ({record.type})"
        if previous is not None and record.seq != previous + 1:
            problems.append(f"{where}: follows seq {previous}")
        previous = record.seq
        event = record.event
        if isinstance(event, SessionCreated) and event.forked_from and not event.history_copied:
            run = _Run(None, seen=False)  # the origin's run may be open at the fork
            continue
        if isinstance(event, RunStarted):
            if run is not None and run.seen:
                problems.append(f"{where}: run {run.run_id} has not ended")
            run = _Run(record.run_id)
            continue
        if run is None:
            if record.type in TERMINAL_RUN_EVENTS or isinstance(event, _CALL_EVENTS):
                problems.append(f"{where}: outside a run")
            continue
        if record.type in TERMINAL_RUN_EVENTS:
            run = None
            continue
        problem = _call_problem(run, event) if run.seen else None
        if problem:
            problems.append(f"{where}: {problem}")
    return problems


_CALL_EVENTS = (
    ToolRequested,
    ToolStarted,
    ToolProgress,
    ToolCompleted,
    ToolFailed,
    ToolApprovalRequested,
    ToolApprovalDecided,
)


def _call_problem(run: _Run, event: object) -> str | None:
    if isinstance(event, ToolRequested):
        run.requested.add(event.call_id)
        return None
    if not isinstance(event, _CALL_EVENTS):
        return None
    call = event.call_id
    if call not in run.requested:
        return f"call {call} before its tool.requested"
    if isinstance(event, ToolStarted):
        run.started.add(call)
    elif isinstance(event, ToolProgress):
        if call not in run.started or call in run.settled:
            return f"progress of call {call}, which is not running"
    elif isinstance(event, ToolApprovalRequested):
        run.waiting.add(call)
    elif isinstance(event, ToolApprovalDecided):
        if call not in run.waiting:
            return f"a decision on call {call}, which does not wait"
        run.waiting.discard(call)
    elif isinstance(event, ToolCompleted | ToolFailed):
        if call in run.settled:
            return f"call {call} settled twice"
        run.settled.add(call)
        run.waiting.discard(call)  # a stop settles a call that waited
    return None
