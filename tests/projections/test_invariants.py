"""The log invariants (projections/invariants.py): each rule, and generated runs."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.envelope import Recorded
from events.types import (
    Event,
    RunCompleted,
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
from projections.invariants import log_problems
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import FakeToolCall, Reply
from tests.support.navi_app import navi_settings, open_navi


def log(*events: Event, first: int = 1) -> list[Recorded]:
    return [
        Recorded(stream_id="s", seq=seq, position=seq, event_id="", timestamp=0.0, event=e)
        for seq, e in enumerate(events, first)
    ]


CREATED = SessionCreated(profile_id="secretary")
STARTED = RunStarted(profile_id="secretary")
ASKED = ToolRequested(call_id="c1", name="todo", arguments={}, step=1)
DONE = ToolCompleted(call_id="c1", name="todo", output="ok")
END = RunCompleted(content="done")


def test_a_good_log_has_no_problems() -> None:
    waits = ToolApprovalRequested(call_id="c1", name="todo", arguments={}, policy="ask")
    decided = ToolApprovalDecided(call_id="c1", approved=True, by="u")
    started = ToolStarted(call_id="c1", name="todo")
    assert log_problems(log(CREATED, STARTED, ASKED, waits, decided, started, DONE, END)) == []
    assert log_problems(log(CREATED, STARTED, ASKED)) == []  # a run still open at the end


def test_each_broken_rule_is_named_with_its_seq() -> None:
    assert log_problems(log(CREATED, STARTED, DONE, ASKED, END)) == [
        "seq 3 (tool.completed): call c1 before its tool.requested"
    ]
    assert log_problems(log(CREATED, STARTED, ASKED, DONE, DONE, END)) == [
        "seq 5 (tool.completed): call c1 settled twice"
    ]
    decided = ToolApprovalDecided(call_id="c1", approved=True, by="u")
    assert log_problems(log(CREATED, STARTED, ASKED, decided, END)) == [
        "seq 4 (tool.approval_decided): a decision on call c1, which does not wait"
    ]
    assert log_problems(log(CREATED, STARTED, STARTED)) == [
        "seq 3 (run.started): run None has not ended"
    ]
    assert log_problems(log(CREATED, END)) == ["seq 2 (run.completed): outside a run"]
    gap = [*log(CREATED, STARTED), *log(END, first=4)]
    assert log_problems(gap) == ["seq 4 (run.completed): follows seq 2"]


def test_progress_comes_only_while_its_call_runs() -> None:
    started = ToolStarted(call_id="c1", name="todo")
    moved = ToolProgress(call_id="c1", progress=1, total=2, message="half")
    assert log_problems(log(CREATED, STARTED, ASKED, started, moved, moved, DONE, END)) == []
    assert log_problems(log(CREATED, STARTED, ASKED, moved, started, DONE, END)) == [
        "seq 4 (tool.progress): progress of call c1, which is not running"
    ]
    assert log_problems(log(CREATED, STARTED, ASKED, started, DONE, moved, END)) == [
        "seq 6 (tool.progress): progress of call c1, which is not running"
    ]
    assert log_problems(log(CREATED, moved)) == ["seq 2 (tool.progress): outside a run"]


def test_a_fork_may_begin_inside_its_origins_run() -> None:
    fork = SessionCreated(profile_id="secretary", forked_from="o", forked_at_seq=7)
    stopped = ToolFailed(call_id="c9", name="todo", reason="stopped")
    assert log_problems(log(fork, stopped, END, STARTED, ASKED, DONE, END)) == []


# ---------------------------------------------------------------- generated runs

READ = FakeToolCall(name="todo", arguments={"action": "read"})
REFUSED = FakeToolCall(name="ssh_exec", arguments={"host": "h", "command": "id"})  # not enabled
FAILS = FakeToolCall(name="filesystem", arguments={"action": "read", "path": "missing.txt"})
BAD_ARGS = FakeToolCall(name="todo", arguments={"action": 7})

calls = st.lists(st.sampled_from([READ, REFUSED, FAILS, BAD_ARGS]), min_size=1, max_size=3)
scripts = st.lists(calls, max_size=3)


async def _turn(root: Path, script: list[list[FakeToolCall]]) -> list[str]:
    replies = [Reply(tool_calls=list(c)) for c in script] + [Reply(text="Done.")]
    async with FakeLLM(replies) as fake:
        settings_ = navi_settings(root, fake.url, planning="off")
        async with open_navi(settings_, llm=fake) as navi:  # checks every log on exit
            session = await navi.create_session("secretary")
            with anyio.fail_after(30):
                await navi.run(session, "Go.")
            records = await navi.store.read(session)
    assert log_problems(records) == []
    return [r.type for r in records]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=scripts)
def test_generated_runs_keep_every_invariant(script: list[list[FakeToolCall]]) -> None:
    with tempfile.TemporaryDirectory() as root:
        types: Any = anyio.run(_turn, Path(root), script)
    assert types[-1] == "run.completed"
    assert types.count("tool.requested") == sum(len(c) for c in script)
