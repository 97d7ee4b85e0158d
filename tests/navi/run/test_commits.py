"""What the run driver commits together, and that every decision is still durable
before its effect: a tool loop costs two commits per iteration, not five."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import anyio
import pytest

from events.batch import AppendRequest, Planned
from events.envelope import Recorded
from events.in_memory import InMemoryEventStore
from events.types import Event, LLMCompleted, ToolCall, ToolRequested, ToolStarted, tag_of
from navi.config import Settings
from navi.llm.stop import StopSignal
from navi.run.driver import RunDeps, RunDriver
from navi.run.state import IllegalTransition, RunState
from navi.session.state import SessionState
from profiles import ProfileRegistry
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import FakeToolCall, RecordedRequest, Reply
from tests.support.navi_app import navi_settings, open_navi
from tools import ToolSettings, create_registry

pytestmark = pytest.mark.anyio

READ = FakeToolCall(name="todo", arguments={"action": "read"})


class CommitLog(InMemoryEventStore):
    """Remembers each commit: the tags it made durable, in order."""

    def __init__(self) -> None:
        ticks = itertools.count()
        super().__init__(clock=lambda: float(next(ticks)))
        self.commits: list[list[str]] = []

    async def _commit(self, batch: list[AppendRequest]) -> list[Planned]:
        planned = await super()._commit(batch)
        self.commits.append([r.type for item in planned for r in item.records])
        return planned

    def durable(self) -> list[str]:
        return [tag for commit in self.commits for tag in commit]


async def run_turn(tmp_path: Path, store: CommitLog, *replies: Reply, **kw: Any) -> str:
    async with FakeLLM(replies, **kw) as fake:
        settings = navi_settings(tmp_path, fake.url, planning="off")
        async with open_navi(settings, store=store, llm=fake) as navi:
            session = await navi.create_session("secretary")
            with anyio.fail_after(20):
                await navi.run(session, "Read the todo list twice.")
    return session


def grouped(records: list[Recorded]) -> list[list[str]]:
    """The session's events by commit (the fixed clock ticks once per commit). A commit
    may take in more than one append (a chunk staged just before, say), never less."""
    groups: dict[float, list[str]] = {}
    for record in records:
        groups.setdefault(record.timestamp, []).append(record.type)
    return list(groups.values())


def together(records: list[Recorded], first: int, *tags: str) -> bool:
    """Whether the events ``tags`` that follow ``records[first]`` (itself the first of
    them) came in one commit."""
    span = records[first : first + len(tags)]
    return [r.type for r in span] == list(tags) and len({r.timestamp for r in span}) == 1


async def test_a_tool_loop_commits_each_decision_with_what_led_to_it(tmp_path: Path) -> None:
    store = CommitLog()
    session = await run_turn(
        tmp_path, store, Reply(tool_calls=[READ]), Reply(tool_calls=[READ]), Reply(text="Done.")
    )
    records = await store.read(session)
    # The log holds the events the loop always recorded, in the same order; only the
    # tool calls of an answer that ends with them are not a chunk of their own (the
    # answer carries them, committed at the same time).
    assert [r.type for r in records][2:] == [
        "run.started",
        "llm.requested",
        "llm.completed",
        "tool.requested",
        "tool.started",
        "tool.completed",
        "llm.requested",
        "llm.completed",
        "tool.requested",
        "tool.started",
        "tool.completed",
        "llm.requested",
        "llm.text",
        "llm.completed",
        "run.completed",
    ]
    types = [r.type for r in records]
    steps = [i for i, tag in enumerate(types) if tag == "llm.completed"]
    for i in steps[:2]:
        assert together(records, i, "llm.completed", "tool.requested", "tool.started")
        assert together(records, i + 3, "tool.completed", "llm.requested")
    assert together(records, steps[2], "llm.completed", "run.completed")
    # From the first llm.requested on: two commits per iteration (and the text chunk of
    # the last answer may be flushed on its own).
    run = records[types.index("llm.requested") :]
    assert len(grouped(run)) <= 2 * 3 + 1


async def test_each_decision_is_durable_before_its_effect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CommitLog()
    seen_by_llm: list[list[str]] = []
    seen_by_tool: list[list[str]] = []

    def respond(request: RecordedRequest) -> Reply:
        seen_by_llm.append(store.durable())
        calls = sum(1 for m in request.body["messages"] if m.get("tool_calls"))
        return Reply(tool_calls=[READ, READ]) if calls == 0 else Reply(text="Done.")

    async def run() -> None:
        async with FakeLLM(responder=respond) as fake:
            settings = navi_settings(tmp_path, fake.url, planning="off")
            async with open_navi(settings, store=store, llm=fake) as navi:
                original = navi.tools.execute

                async def watched(name: str, args: object, ctx: Any) -> Any:
                    seen_by_tool.append(store.durable())
                    return await original(name, args, ctx)

                monkeypatch.setattr(navi.tools, "execute", watched)
                session = await navi.create_session("secretary")
                with anyio.fail_after(20):
                    await navi.run(session, "Read it twice at once.")

    await run()
    # The LLM is asked only once its llm.requested is durable, ...
    for durable in seen_by_llm:
        assert durable[-1] == "llm.requested"
    # ... and each tool runs only once its tool.requested is; the first result is
    # durable before the second call runs, the last one with the next llm.requested.
    first, second = seen_by_tool
    assert first.count("tool.requested") == 2 and first.count("tool.completed") == 0
    assert second.count("tool.completed") == 1
    last = next(c for c in reversed(store.commits) if "tool.completed" in c)
    assert last[last.index("tool.completed") + 1] == "llm.requested"


async def test_tool_calls_are_a_chunk_when_more_of_the_answer_follows(tmp_path: Path) -> None:
    store = CommitLog()
    session = await run_turn(
        tmp_path,
        store,
        Reply(tool_calls=[READ], text="", thinking=""),
        Reply(text="Done."),
    )
    types = [r.type for r in await store.read(session)]
    assert "llm.tool_calls" not in types
    # An answer that goes on after its calls (here: the stream breaks off) keeps them
    # as a chunk, in the order they came.
    store = CommitLog()
    session = await run_turn(
        tmp_path / "broken",
        store,
        Reply(tool_calls=[READ], end_after=1),
        Reply(text="Done."),
    )
    types = [r.type for r in await store.read(session)]
    assert types.index("llm.tool_calls") == types.index("llm.failed") - 1


async def test_a_plain_answer_ends_the_run_in_the_same_commit(tmp_path: Path) -> None:
    store = CommitLog()
    session = await run_turn(tmp_path, store, Reply(text="Hello."))
    records = await store.read(session)
    assert together(records, len(records) - 2, "llm.completed", "run.completed")


class RacingHost:
    """A host whose first commit loses a race with a stop: the session recorded
    stop.requested while the driver waited for its lock."""

    session_id = "s"

    def __init__(self) -> None:
        self.state = SessionState()
        self.stop_signal = StopSignal()
        self.recorded: list[tuple[str, ...]] = []
        self.raced = False

    async def record(self, *events: Event) -> None:
        if not self.raced:
            self.raced = True
            self.stop_signal.set()
            raise IllegalTransition(RunState.STOPPING, "tool.requested")
        self.recorded.append(tuple(tag_of(e) for e in events))


async def test_a_stop_that_wins_the_race_leaves_only_the_answer(tmp_path: Path) -> None:
    host = RacingHost()
    deps = RunDeps(
        settings=Settings(),
        profiles=ProfileRegistry(()),
        tools=create_registry(ToolSettings(tools_dir=str(tmp_path))),
        builder=None,  # type: ignore[arg-type]
        backend_for=None,  # type: ignore[arg-type]
        files_root=tmp_path,
    )
    driver = RunDriver(host, deps)  # type: ignore[arg-type]
    call = ToolCall(id="c1", name="todo", arguments={"action": "read"})
    # The driver holds the answer and the decision taken on it (decide: request_tools),
    # and commits them with the first call's tool.started (decide: run_tools).
    driver.outcomes.append(LLMCompleted(tool_calls=(call,), finish_reason="tool_calls"))
    driver.decided.append(ToolRequested(call_id="c1", name="todo", arguments=call.arguments))
    assert not await driver.commit([ToolStarted(call_id="c1", name="todo")])
    # Nothing new starts once the stop is in: the answer is kept, the call is not run.
    assert host.recorded == [("llm.completed",)]
    assert driver.outcomes == [] and driver.decided == []


async def test_a_refused_calls_outcome_follows_its_request(tmp_path: Path) -> None:
    """A call the profile does not enable is refused before it runs: its tool.failed
    used to be committed ahead of its tool.requested (issue 31)."""
    store = CommitLog()
    refused = FakeToolCall(name="ssh_exec", arguments={"host": "h", "command": "id"})
    session = await run_turn(
        tmp_path, store, Reply(tool_calls=[refused, READ]), Reply(text="Done.")
    )
    records = await store.read(session)
    seen: set[str] = set()
    for record in records:
        event: Any = record.event
        if record.type == "tool.requested":
            seen.add(event.call_id)
        elif record.type in ("tool.started", "tool.completed", "tool.failed"):
            assert event.call_id in seen, [r.type for r in records]
    failed = [r.event for r in records if r.type == "tool.failed"]
    assert [f.name for f in failed] == ["ssh_exec"]  # type: ignore[attr-defined]
    assert records[-1].type == "run.completed"


def test_the_writer_refuses_an_outcome_before_its_request() -> None:
    from events.types import ToolFailed
    from navi.run.progress import INITIAL, CallOrderError, check_call_order

    call = ToolRequested(call_id="c1", name="todo", arguments={}, step=1)
    failed = ToolFailed(call_id="c1", name="todo", error="no")
    check_call_order(INITIAL, [call, failed])
    with pytest.raises(CallOrderError, match=r"before its tool\.requested"):
        check_call_order(INITIAL, [failed, call])
    with pytest.raises(CallOrderError):
        check_call_order(INITIAL, [ToolStarted(call_id="c2", name="todo")])
