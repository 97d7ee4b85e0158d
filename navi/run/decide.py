"""What the run does next: one pure table ``(state, progress, loop) → step``.

``navi/run/state.py`` says what may happen; this module says what the driver *does*.
The table ``RULES`` is read top to bottom and the first row whose states include the
run's state and whose condition holds gives the step; a test walks every state with
every progress case (tests/navi/run/test_decide.py). The driver (navi/run/driver.py)
only carries steps out; it never decides.

The inputs:

- the run state, and the run's progress (a fold of the log: navi/run/progress.py);
- ``Loop``: what only the driver knows, never in the log — the stop signal (set at
  once, before ``stop.requested`` is durable), whether planning is behind it, which
  iteration's pre-call context check is done, and how many retries it may make.

Both are the state *after the outcomes the driver holds* (see "Commits" below), so a
decision sees what an effect just produced before it is committed.

Commits. A step's events are recorded in the commit of the outcomes that led to it: an
LLM answer goes with its ``tool.requested`` (and the first call's ``tool.started``) or
with ``run.completed``; a tool result goes with the next ``llm.requested``. The rule is
the same for every step: an effect's outcome is held; a step that only records adds its
events to what is held; a step that waits or has an effect first commits everything
held, with its own start events. So every decision is durable before its effect, and a
tool loop costs two commits per iteration. If a stop won the race for the commit (its
``stop.requested`` came first and the decision is now illegal), only the outcomes are
recorded and the table is asked again: it answers ``finish_stop``.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

import msgspec

from navi.run.progress import THINKING_NOT_SUPPORTED, RunProgress
from navi.run.state import ACTIVE_STATES, RunState

AWAITING_LLM = RunState.AWAITING_LLM
WAITING_FOR_LLM = RunState.WAITING_FOR_LLM
PLANNING = RunState.PLANNING
STREAMING = RunState.STREAMING
EXECUTING_TOOLS = RunState.EXECUTING_TOOLS
AWAITING_APPROVAL = RunState.AWAITING_APPROVAL
ANSWERED = RunState.ANSWERED
COMPRESSING = RunState.COMPRESSING
STOPPING = RunState.STOPPING


class Step(StrEnum):
    END = "end"  # the run is over: nothing to do
    ABANDON_COMPRESSION = "abandon_compression"  # a crash cut it: record it failed
    FINISH_STOP = "finish_stop"  # open calls fail as "stopped", then run.stopped
    COMPLETE = "complete"  # run.completed with the answer
    REQUEST_TOOLS = "request_tools"  # tool.requested for the answer's calls
    ASK_APPROVAL = "ask_approval"  # tool.approval_requested for the next open call
    AWAIT_DECISION = "await_decision"  # until a person decides, a stop, or the timeout
    RUN_TOOLS = "run_tools"  # run the next open call(s); the result is held
    RETRY = "retry"  # after a back-off, the same iteration's next attempt
    GIVE_UP = "give_up"  # run.failed with the last error
    WAIT_FOR_LLM = "wait_for_llm"  # a probe: away → llm.waiting (the run stays open),
    # answering (but failing the call) → run.failed
    WHEN_BACK = "when_back"  # until the server answers, Try again or a stop; then retry
    REISSUE = "reissue"  # a call a crash left open: asked again (next attempt)
    OUT_OF_STEPS = "out_of_steps"  # the iteration budget is spent: run.completed
    CHECK_CONTEXT = "check_context"  # pre-call compression check, once per iteration
    PLAN = "plan"  # the planning phases, if the profile plans
    CALL_LLM = "call_llm"  # injections, llm.requested, the stream; the answer is held


class Loop(msgspec.Struct, frozen=True, kw_only=True):
    """What the driver knows that the log does not say."""

    stop_signal: bool = False  # a stop was asked for (its event may not be durable yet)
    planned: bool = False  # planning, or the decision not to plan, is behind us
    checked: int = 0  # the iteration whose pre-call context check is done
    retries: int = 3  # failed attempts an iteration may retry (NAVI_LLM_RETRIES)
    must_ask: bool = False  # the next open call's policy asks, and no one decided yet


Condition = Callable[[RunProgress, Loop], bool]


def always(p: RunProgress, loop: Loop) -> bool:
    return True


def stop_signal(p: RunProgress, loop: Loop) -> bool:
    """A stop was asked for (the signal; its event may still be on its way)."""
    return loop.stop_signal


def calls_unrequested(p: RunProgress, loop: Loop) -> bool:
    """The answer asked for calls that have no `tool.requested` yet."""
    return len(p.requested) < len(p.calls)


def calls_open(p: RunProgress, loop: Loop) -> bool:
    """A requested call has no result yet."""
    return len(p.resolved) < len(p.requested)


def must_ask(p: RunProgress, loop: Loop) -> bool:
    """The next open call must wait for a person's decision (navi/run/approval.py)."""
    return loop.must_ask


def may_retry(p: RunProgress, loop: Loop) -> bool:
    """The last attempt failed, may be retried, and retries are left."""
    return p.failures > 0 and p.retryable and p.failures <= loop.retries


def server_away(p: RunProgress, loop: Loop) -> bool:
    """The retries are spent on a transient fault (the server may be away)."""
    return p.failures > 0 and p.retryable and p.last_kind != THINKING_NOT_SUPPORTED


def failed(p: RunProgress, loop: Loop) -> bool:
    """The last attempt failed."""
    return p.failures > 0


def call_open(p: RunProgress, loop: Loop) -> bool:
    """A tool-loop call is out, with no outcome (a crash cut it)."""
    return p.llm_open


def budget_spent(p: RunProgress, loop: Loop) -> bool:
    """The iterations reached `max_iterations`."""
    return p.iterations >= p.max_iterations


def unchecked(p: RunProgress, loop: Loop) -> bool:
    """The next iteration's context check is not done."""
    return loop.checked != p.iterations + 1


def unplanned(p: RunProgress, loop: Loop) -> bool:
    """First iteration, planning not behind us, no plan yet."""
    return not loop.planned and p.iterations == 0 and not p.plan_ready


class Rule(msgspec.Struct, frozen=True):
    states: frozenset[RunState]
    when: Condition
    step: Step


def _rule(states: set[RunState], when: Condition, step: Step) -> Rule:
    return Rule(frozenset(states), when, step)


# Where a new LLM call may be prepared: after run.started or a failure, after the
# results of a step, or after planning (which may end without a plan).
_BEFORE_A_CALL = {AWAITING_LLM, EXECUTING_TOOLS, PLANNING}

# fmt: off
RULES: tuple[Rule, ...] = (
    #     in states                      when                 step
    _rule({COMPRESSING},                 always,              Step.ABANDON_COMPRESSION),
    _rule({STOPPING},                    always,              Step.FINISH_STOP),
    _rule(set(ACTIVE_STATES),            stop_signal,         Step.FINISH_STOP),
    _rule({ANSWERED},                    always,              Step.COMPLETE),
    _rule({EXECUTING_TOOLS},             calls_unrequested,   Step.REQUEST_TOOLS),
    _rule({EXECUTING_TOOLS},             must_ask,            Step.ASK_APPROVAL),
    _rule({EXECUTING_TOOLS},             calls_open,          Step.RUN_TOOLS),
    _rule({AWAITING_APPROVAL},           always,              Step.AWAIT_DECISION),
    _rule({AWAITING_LLM},                may_retry,           Step.RETRY),
    _rule({AWAITING_LLM},                server_away,         Step.WAIT_FOR_LLM),
    _rule({AWAITING_LLM},                failed,              Step.GIVE_UP),
    _rule({WAITING_FOR_LLM},             always,              Step.WHEN_BACK),
    _rule({STREAMING},                   always,              Step.REISSUE),
    _rule({AWAITING_LLM},                call_open,           Step.REISSUE),
    _rule({AWAITING_LLM, EXECUTING_TOOLS}, budget_spent,      Step.OUT_OF_STEPS),
    _rule(_BEFORE_A_CALL,                unchecked,           Step.CHECK_CONTEXT),
    _rule({AWAITING_LLM, PLANNING},      unplanned,           Step.PLAN),
    _rule(_BEFORE_A_CALL,                always,              Step.CALL_LLM),
)
# fmt: on


def decide(state: RunState, progress: RunProgress, loop: Loop) -> Step:
    """Pure: the run's next step (``end`` in a state where no run is going)."""
    for rule in RULES:
        if state in rule.states and rule.when(progress, loop):
            return rule.step
    return Step.END


def table_markdown() -> str:
    """``RULES`` as Markdown, for docs/state-machine.md."""
    lines = ["| # | in states | when | step |", "|---|---|---|---|"]
    order = list(RunState)
    for number, rule in enumerate(RULES, 1):
        states = ", ".join(f"`{s.value}`" for s in sorted(rule.states, key=order.index))
        if rule.states == ACTIVE_STATES:
            states = "any active state"
        when = "" if rule.when is always else f"`{rule.when.__name__}`: {_doc(rule.when)}"
        lines.append(f"| {number} | {states} | {when} | `{rule.step.value}` |")
    lines += ["", "In any other state (no run is going) the step is `end`."]
    return "\n".join(lines) + "\n"


def _doc(condition: Condition) -> str:
    doc = condition.__doc__ or ""
    return doc[0].lower() + doc[1:].rstrip(".") if doc else ""
