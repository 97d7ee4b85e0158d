from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings

from events.types import (
    EVENT_TYPES,
    ContextCompressed,
    ContextCompressing,
    ContextCompressionFailed,
    ContextInjected,
    Event,
    LLMCompleted,
    LLMFailed,
    LLMRequested,
    LLMText,
    LLMThinking,
    LLMToolCalls,
    LLMWaiting,
    MemoryExtractionFailed,
    MemoryFactEdited,
    MemoryFactForgotten,
    MemoryFactLearned,
    MemoryReset,
    MemorySessionProcessed,
    MemorySummaryUpdated,
    NoteDeleted,
    NoteSaved,
    PlanReady,
    PlanStatus,
    ProfileSwitched,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunStopped,
    ScratchpadUpdated,
    SessionCreated,
    SessionDeleted,
    SessionModelChosen,
    SessionPinned,
    SessionRenamed,
    SettingsUpdated,
    StopRequested,
    SubagentFinished,
    SubagentSpawned,
    TodoUpdated,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCall,
    ToolCompleted,
    ToolFailed,
    ToolProgress,
    ToolRequested,
    ToolStarted,
    UserMessage,
    tag_of,
)
from navi.run.state import (
    ACTIVE_STATES,
    IGNORED,
    INITIAL,
    KINDS,
    RESTING_STATES,
    TRANSITIONS,
    IllegalTransition,
    RunState,
    event_kind,
    mermaid,
    state_at,
    table_markdown,
    transition,
)
from tests.projections.logs import records, session_logs

ROOT = Path(__file__).resolve().parents[3]
CALL = ToolCall(id="c1", name="web_search")

# One event per kind: every tag of events.types, and the derived kinds.
SAMPLES: dict[str, Event] = {
    "session.created": SessionCreated(profile_id="p"),
    "session.pinned": SessionPinned(pinned=True),
    "session.renamed": SessionRenamed(title="t"),
    "session.model_chosen": SessionModelChosen(model="m"),
    "settings.updated": SettingsUpdated(think="off"),
    "session.deleted": SessionDeleted(),
    "user.message": UserMessage(text="hi"),
    "run.started": RunStarted(profile_id="p"),
    "plan.status": PlanStatus(phase=1, label="thinking"),
    "plan.ready": PlanReady(plan="1. do"),
    "context.injected": ContextInjected(kind="budget"),
    "llm.requested": LLMRequested(),
    "llm.requested+plan": LLMRequested(purpose="plan"),
    "llm.requested+compress": LLMRequested(purpose="compress"),
    "llm.requested+memory": LLMRequested(purpose="memory"),
    "llm.thinking": LLMThinking(text="hm"),
    "llm.text": LLMText(text="hi"),
    "llm.tool_calls": LLMToolCalls(calls=(CALL,)),
    "llm.completed": LLMCompleted(content="answer"),
    "llm.completed+tools": LLMCompleted(tool_calls=(CALL,)),
    "llm.failed": LLMFailed(error="down"),
    "llm.waiting": LLMWaiting(error="down"),
    "tool.requested": ToolRequested(call_id="c1", name="web_search"),
    "tool.started": ToolStarted(call_id="c1"),
    "tool.progress": ToolProgress(call_id="c1", progress=1, total=2),
    "tool.completed": ToolCompleted(call_id="c1", name="web_search", output="ok"),
    "tool.failed": ToolFailed(call_id="c1", name="web_search", reason="stopped"),
    "tool.approval_requested": ToolApprovalRequested(call_id="c1", name="terminal"),
    "tool.approval_decided": ToolApprovalDecided(call_id="c1", approved=True),
    "context.compressing": ContextCompressing(),
    "context.compressed": ContextCompressed(from_seq=1, to_seq=2, summary="s"),
    "context.compression_failed": ContextCompressionFailed(error="e"),
    "profile.switched": ProfileSwitched(profile_id="coder"),
    "subagent.spawned": SubagentSpawned(child_stream_id="k", call_id="c1", task="t"),
    "subagent.finished": SubagentFinished(child_stream_id="k", call_id="c1"),
    "stop.requested": StopRequested(),
    "run.stopped": RunStopped(),
    "run.completed": RunCompleted(),
    "run.failed": RunFailed(error="e"),
    "todo.updated": TodoUpdated(items=()),
    "scratchpad.updated": ScratchpadUpdated(section="s", content="c"),
    "note.saved": NoteSaved(note_id="n", text="t"),
    "note.deleted": NoteDeleted(note_id="n"),
    "memory.fact_learned": MemoryFactLearned(
        fact_id="f", category="preference", key="k", value="v", session_id="s", from_seq=1, to_seq=1
    ),
    "memory.fact_edited": MemoryFactEdited(fact_id="f", value="v"),
    "memory.fact_forgotten": MemoryFactForgotten(fact_id="f"),
    "memory.summary_updated": MemorySummaryUpdated(text="t"),
    "memory.session_processed": MemorySessionProcessed(session_id="s", from_seq=1, to_seq=1),
    "memory.extraction_failed": MemoryExtractionFailed(
        session_id="s", from_seq=1, to_seq=1, error="e"
    ),
    "memory.reset": MemoryReset(),
}


def test_every_event_type_is_classified() -> None:
    """A new event type must be put in the table's vocabulary or in IGNORED on purpose."""
    assert not IGNORED & set(KINDS)
    tags = set(EVENT_TYPES)
    unclassified = tags - IGNORED - set(KINDS)
    assert not unclassified, f"classify these tags in navi/run/state.py: {unclassified}"
    assert {tag_of(event) for event in SAMPLES.values()} == tags, "add a sample per tag"
    assert set(SAMPLES) == set(KINDS) | IGNORED


def test_table_speaks_only_of_known_kinds_and_states() -> None:
    assert set(TRANSITIONS) == set(RunState)
    for row in TRANSITIONS.values():
        assert set(row) <= set(KINDS)
    assert ACTIVE_STATES | RESTING_STATES | {RunState.COMPRESSING_AFTER_RUN} == set(RunState)
    assert not ACTIVE_STATES & RESTING_STATES


def test_samples_have_their_kind() -> None:
    for kind, event in SAMPLES.items():
        assert event_kind(event) == kind


@pytest.mark.parametrize("state", list(RunState), ids=str)
@pytest.mark.parametrize("kind", sorted(SAMPLES), ids=str)
def test_every_state_and_event_pair(state: RunState, kind: str) -> None:
    event = SAMPLES[kind]
    if kind in IGNORED:
        assert transition(state, event) is state
        return
    target = TRANSITIONS[state].get(kind)
    if target is not None:
        assert transition(state, event) is target
        return
    with pytest.raises(IllegalTransition) as info:
        transition(state, event)
    message = str(info.value)
    assert repr(kind) in message and repr(state.value) in message
    assert info.value.state is state and info.value.kind == kind


def test_a_simple_turn() -> None:
    turn = [
        SessionCreated(profile_id="p"),
        UserMessage(text="hi"),
        RunStarted(profile_id="p"),
        LLMRequested(),
        LLMText(text="he"),
        LLMCompleted(tool_calls=(CALL,)),
        ToolRequested(call_id="c1", name="web_search"),
        ToolCompleted(call_id="c1", name="web_search", output="found"),
        LLMRequested(iteration=1),
        LLMText(text="done"),
        LLMCompleted(content="done"),
        RunCompleted(content="done"),
    ]
    log = records(turn)
    expected = [
        "idle", "idle", "awaiting_llm", "awaiting_llm", "streaming", "executing_tools",
        "executing_tools", "executing_tools", "awaiting_llm", "streaming", "answered", "done",
    ]  # fmt: skip
    assert [state_at(log, until_seq=r.seq).value for r in log] == expected
    assert state_at(log) is RunState.DONE


def test_a_call_waits_for_approval_then_runs_or_stops() -> None:
    asked = [
        UserMessage(text="hi"),
        RunStarted(profile_id="p"),
        LLMRequested(),
        LLMCompleted(tool_calls=(CALL,)),
        ToolRequested(call_id="c1", name="web_search"),
        ToolApprovalRequested(call_id="c1", name="web_search"),
    ]
    decided = [
        ToolApprovalDecided(call_id="c1", approved=True, by="ann"),
        ToolStarted(call_id="c1"),
        ToolCompleted(call_id="c1", name="web_search", output="found"),
    ]
    log = records(asked + decided)
    states = [state_at(log, until_seq=r.seq).value for r in log]
    assert states[5:] == [
        "awaiting_approval",
        "executing_tools",
        "executing_tools",
        "executing_tools",
    ]
    # Nothing but the decision or a stop is legal while a call waits.
    with pytest.raises(IllegalTransition):
        state_at(records([*asked, ToolStarted(call_id="c1")]))
    with pytest.raises(IllegalTransition):
        state_at(records([*asked, LLMRequested(iteration=2)]))
    stopped = records(
        [
            *asked,
            StopRequested(),
            ToolFailed(call_id="c1", name="web_search", reason="stopped"),
            RunStopped(),
        ]
    )
    assert state_at(stopped) is RunState.STOPPED


def test_a_run_waits_for_the_model_server_then_goes_on_or_stops() -> None:
    away = [
        UserMessage(text="hi"),
        RunStarted(profile_id="p"),
        LLMRequested(),
        LLMFailed(error="unreachable", kind="server_unreachable", retryable=True),
        LLMWaiting(error="unreachable", kind="server_unreachable"),
    ]
    assert state_at(records(away)) is RunState.WAITING_FOR_LLM
    assert RunState.WAITING_FOR_LLM in ACTIVE_STATES  # open: recovery continues it
    back = records([*away, LLMRequested(attempt=2), LLMCompleted(content="hi"), RunCompleted()])
    assert state_at(back) is RunState.DONE
    # Nothing streams and no tool starts while it waits.
    with pytest.raises(IllegalTransition):
        state_at(records([*away, LLMText(text="early")]))
    stopped = records([*away, StopRequested(), RunStopped()])
    assert state_at(stopped) is RunState.STOPPED


def test_state_at_names_the_seq_of_an_illegal_event() -> None:
    log = records([UserMessage(text="hi"), LLMText(text="no run yet")])
    with pytest.raises(IllegalTransition, match=r"'llm.text' \(seq 2\).*'idle'"):
        state_at(log)


def test_a_stop_leads_through_stopping() -> None:
    log = records(
        [
            UserMessage(text="hi"),
            RunStarted(profile_id="p"),
            LLMRequested(),
            LLMText(text="part"),
            StopRequested(),
            LLMText(text="ial"),
            RunStopped(),
        ]
    )
    assert state_at(log, until_seq=5) is RunState.STOPPING
    assert state_at(log) is RunState.STOPPED
    # The next turn starts from the stopped state.
    assert state_at(records([UserMessage(text="again")]), state=RunState.STOPPED) is INITIAL


@settings(max_examples=150, deadline=None)
@given(session_logs(max_turns=3))
def test_generated_logs_are_legal_and_end_at_rest(events: list[Event]) -> None:
    state = state_at(records(events))
    assert state in RESTING_STATES


def test_mermaid_lists_every_transition() -> None:
    diagram = mermaid()
    assert diagram.startswith("stateDiagram-v2\n    [*] --> idle\n")
    for source, row in TRANSITIONS.items():
        for kind, target in row.items():
            pattern = rf"^    {source.value} --> {target.value} : .*(?<![\w.+]){re.escape(kind)}"
            assert re.search(pattern + r"(,|$)", diagram, re.M), (source, kind, target)


def _generated_block(text: str, name: str) -> str:
    match = re.search(
        rf"<!-- BEGIN GENERATED {name} -->\n(.*?)<!-- END GENERATED {name} -->", text, re.S
    )
    assert match, f"docs/state-machine.md lacks the generated {name} block"
    return match.group(1)


def test_docs_show_the_current_table() -> None:
    """docs/state-machine.md is regenerated with `python scripts/state_diagram.py --update-doc`."""
    doc = (ROOT / "docs" / "state-machine.md").read_text()
    assert _generated_block(doc, "mermaid") == f"```mermaid\n{mermaid()}```\n"
    assert _generated_block(doc, "table") == table_markdown()


def test_script_prints_the_diagram() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "state_diagram.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout == mermaid()
