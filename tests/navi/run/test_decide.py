"""The decision table (navi/run/decide.py), walked: every run state with every progress
case, as tests/navi/run/test_state.py walks the model table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from events.types import ToolCall
from navi.run.decide import RULES, Loop, Step, decide, table_markdown
from navi.run.progress import RunProgress
from navi.run.state import ACTIVE_STATES, TRANSITIONS, RunState

ROOT = Path(__file__).resolve().parents[3]
C1 = ToolCall(id="c1", name="todo")
DONE_C1 = frozenset({"c1"})
READY = Loop(planned=True, checked=2)  # iteration 1 is behind, its check for 2 done

# Progress cases: the run's progress and the driver's own facts.
CASES: dict[str, tuple[RunProgress, Loop]] = {
    "run_started": (RunProgress(), Loop()),
    "checked": (RunProgress(), Loop(checked=1)),
    "planned": (RunProgress(), Loop(checked=1, planned=True)),
    "plan_ready": (RunProgress(plan_ready=True), Loop(checked=1)),
    "results_in": (RunProgress(iterations=1, calls=(C1,), requested=(C1,), resolved=DONE_C1), Loop()),
    "next_call": (RunProgress(iterations=1, calls=(C1,), requested=(C1,), resolved=DONE_C1), READY),
    "calls_unrequested": (RunProgress(iterations=1, calls=(C1,)), READY),
    "calls_open": (RunProgress(iterations=1, calls=(C1,), requested=(C1,)), READY),
    "must_ask": (RunProgress(iterations=1, calls=(C1,), requested=(C1,)), Loop(planned=True, checked=2, must_ask=True)),
    "call_open": (RunProgress(iterations=1, llm_open=True), READY),
    "failed_retryable": (RunProgress(iterations=1, failures=1, retryable=True), READY),
    "failed_too_often": (RunProgress(iterations=1, failures=4, retryable=True), READY),
    "no_thinking_too_often": (RunProgress(iterations=1, failures=4, retryable=True, last_kind="thinking_not_supported"), READY),
    "failed_for_good": (RunProgress(iterations=1, failures=1), READY),
    "budget_spent": (RunProgress(iterations=5, max_iterations=5), READY),
    "stop_signal": (RunProgress(iterations=1, calls=(C1,), requested=(C1,)), Loop(stop_signal=True)),
}  # fmt: skip

ABANDON = Step.ABANDON_COMPRESSION
CHECK = Step.CHECK_CONTEXT
CALL = Step.CALL_LLM
COMPLETE = Step.COMPLETE
GIVE_UP = Step.GIVE_UP
OUT = Step.OUT_OF_STEPS
PLAN = Step.PLAN
REISSUE = Step.REISSUE
REQUEST = Step.REQUEST_TOOLS
RETRY = Step.RETRY
RUN = Step.RUN_TOOLS
STOP = Step.FINISH_STOP
ASK = Step.ASK_APPROVAL
WAIT = Step.AWAIT_DECISION
AWAY = Step.WAIT_FOR_LLM
BACK = Step.WHEN_BACK

# The states in which a run is going, in the order of EXPECTED's columns. In every other
# state the step is ``end``. Some pairs cannot occur (a failed call while tools run):
# their step is what the table would do, shown so that nothing is left undefined.
COLUMNS = (
    RunState.AWAITING_LLM,
    RunState.WAITING_FOR_LLM,
    RunState.PLANNING,
    RunState.STREAMING,
    RunState.EXECUTING_TOOLS,
    RunState.AWAITING_APPROVAL,
    RunState.ANSWERED,
    RunState.COMPRESSING,
    RunState.STOPPING,
)
# fmt: off
EXPECTED: dict[str, tuple[Step, ...]] = {
    #                      awaiting_llm waiting planning streaming executing_tools awaiting_approval answered compressing stopping
    "run_started":        (CHECK,       BACK,   CHECK,   REISSUE,  CHECK,          WAIT,             COMPLETE, ABANDON,    STOP),
    "checked":            (PLAN,        BACK,   PLAN,    REISSUE,  CALL,           WAIT,             COMPLETE, ABANDON,    STOP),
    "planned":            (CALL,        BACK,   CALL,    REISSUE,  CALL,           WAIT,             COMPLETE, ABANDON,    STOP),
    "plan_ready":         (CALL,        BACK,   CALL,    REISSUE,  CALL,           WAIT,             COMPLETE, ABANDON,    STOP),
    "results_in":         (CHECK,       BACK,   CHECK,   REISSUE,  CHECK,          WAIT,             COMPLETE, ABANDON,    STOP),
    "next_call":          (CALL,        BACK,   CALL,    REISSUE,  CALL,           WAIT,             COMPLETE, ABANDON,    STOP),
    "calls_unrequested":  (CALL,        BACK,   CALL,    REISSUE,  REQUEST,        WAIT,             COMPLETE, ABANDON,    STOP),
    "calls_open":         (CALL,        BACK,   CALL,    REISSUE,  RUN,            WAIT,             COMPLETE, ABANDON,    STOP),
    "must_ask":           (CALL,        BACK,   CALL,    REISSUE,  ASK,            WAIT,             COMPLETE, ABANDON,    STOP),
    "call_open":          (REISSUE,     BACK,   CALL,    REISSUE,  CALL,           WAIT,             COMPLETE, ABANDON,    STOP),
    "failed_retryable":   (RETRY,       BACK,   CALL,    REISSUE,  CALL,           WAIT,             COMPLETE, ABANDON,    STOP),
    "failed_too_often":   (AWAY,        BACK,   CALL,    REISSUE,  CALL,           WAIT,             COMPLETE, ABANDON,    STOP),
    "no_thinking_too_often": (GIVE_UP,  BACK,   CALL,    REISSUE,  CALL,           WAIT,             COMPLETE, ABANDON,    STOP),
    "failed_for_good":    (GIVE_UP,     BACK,   CALL,    REISSUE,  CALL,           WAIT,             COMPLETE, ABANDON,    STOP),
    "budget_spent":       (OUT,         BACK,   CHECK,   REISSUE,  OUT,            WAIT,             COMPLETE, ABANDON,    STOP),
    "stop_signal":        (STOP,        STOP,   STOP,    STOP,     STOP,           STOP,             STOP,     ABANDON,    STOP),
}
# fmt: on

# The event each step records first: it must be legal where the table takes the step.
FIRST_EVENT = {
    Step.ABANDON_COMPRESSION: "context.compression_failed",
    Step.FINISH_STOP: "stop.requested",  # run.stopped in ``stopping``
    Step.COMPLETE: "run.completed",
    Step.REQUEST_TOOLS: "tool.requested",
    Step.RUN_TOOLS: "tool.started",
    Step.ASK_APPROVAL: "tool.approval_requested",
    Step.AWAIT_DECISION: "tool.approval_decided",  # NAVI_APPROVAL_TIMEOUT's denial
    Step.RETRY: "llm.requested",
    Step.GIVE_UP: "run.failed",
    Step.WAIT_FOR_LLM: "llm.waiting",
    Step.WHEN_BACK: "llm.requested",
    Step.REISSUE: "llm.requested",
    Step.OUT_OF_STEPS: "run.completed",
    Step.CHECK_CONTEXT: None,  # records context.compressing only where a compression may start
    Step.PLAN: "plan.status",
    Step.CALL_LLM: "llm.requested",  # after context.injected, legal where it is
}


def test_the_expected_table_covers_every_case_and_active_state() -> None:
    assert set(EXPECTED) == set(CASES)
    assert set(COLUMNS) == set(ACTIVE_STATES)
    assert all(len(row) == len(COLUMNS) for row in EXPECTED.values())


@pytest.mark.parametrize("state", list(RunState), ids=str)
@pytest.mark.parametrize("case", sorted(CASES), ids=str)
def test_every_state_and_progress_case(state: RunState, case: str) -> None:
    progress, loop = CASES[case]
    step = decide(state, progress, loop)
    if state not in ACTIVE_STATES:
        assert step is Step.END
        return
    assert step is EXPECTED[case][COLUMNS.index(state)]
    first = FIRST_EVENT[step]
    if step is Step.FINISH_STOP and state is RunState.STOPPING:
        first = "run.stopped"
    assert first is None or first in TRANSITIONS[state], (state, step, first)


def test_every_rule_decides_some_case() -> None:
    """No row of the table is dead: each is the first match for some state and case."""
    fired = set()
    for progress, loop in CASES.values():
        for state in RunState:
            for index, rule in enumerate(RULES):
                if state in rule.states and rule.when(progress, loop):
                    fired.add(index)
                    break
    assert fired == set(range(len(RULES)))
    assert {rule.step for rule in RULES} == set(Step) - {Step.END}


def test_docs_show_the_current_decision_table() -> None:
    """docs/state-machine.md is regenerated with `python scripts/state_diagram.py --update-doc`."""
    doc = (ROOT / "docs" / "state-machine.md").read_text()
    match = re.search(
        r"<!-- BEGIN GENERATED decisions -->\n(.*?)<!-- END GENERATED decisions -->", doc, re.S
    )
    assert match, "docs/state-machine.md lacks the generated decisions block"
    assert match.group(1) == table_markdown()
