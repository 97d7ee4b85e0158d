"""Subagents as child session actors: real Navi, SQLite, the fake LLM server over HTTP."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from events.envelope import NewEvent, Recorded
from events.factory import store_for_url
from events.types import (
    TERMINAL_RUN_EVENTS,
    RunCompleted,
    RunStarted,
    RunStopped,
    ScratchpadUpdated,
    SessionCreated,
    SubagentFinished,
    SubagentSpawned,
    TodoUpdated,
    ToolCompleted,
    ToolFailed,
)
from navi.accounts import User, Users
from navi.app import Navi
from navi.session.errors import SessionError
from projections.context import CONTEXT
from projections.fold import fold
from projections.tool_results import UNTRUSTED_NOTE
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import FakeToolCall, RecordedRequest, Reply
from tests.support.navi_app import navi_settings, open_navi, run_stream
from tests.support.well_formed import assert_well_formed

LEAD_MAIN = "LEAD MAIN PROMPT"
LEAD_SUB = "LEAD SUB PROMPT"
RESEARCHER_SUB = "RESEARCHER SUB PROMPT"
SECRETARY_SUB = "research and writing sub-agent"
RESEARCH_MODEL = "research-model:latest"
PLANNER = "You are the planning module"


def write_profile(root: Path, profile_id: str, prompt: str, **config: Any) -> None:
    folder = root / profile_id
    folder.mkdir(parents=True)
    config = {"id": profile_id, "name": profile_id.title(), **config}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "system_prompt.txt").write_text(prompt)


def test_profiles(root: Path) -> dict[str, str]:
    """A ``lead`` whose subagents may spawn subagents, and a ``researcher`` with a model
    of its own and subagent planning."""
    folder = root / "profiles"
    tools = ["spawn_agent", "todo", "scratchpad", "filesystem"]
    write_profile(
        folder,
        "lead",
        LEAD_MAIN,
        enabled_tools=tools,
        subagent_tools=tools,
        subagent_system_prompt=LEAD_SUB,
    )
    write_profile(
        folder,
        "researcher",
        "RESEARCHER MAIN PROMPT",
        model=RESEARCH_MODEL,
        enabled_tools=["web_search", "todo", "scratchpad", "filesystem"],
        subagent_tools=["todo", "scratchpad", "filesystem"],
        subagent_system_prompt=RESEARCHER_SUB,
        subagent_planning_enabled=True,
        max_iterations=3,
    )
    return {"PROFILES_DIR": str(folder)}


test_profiles.__test__ = False  # type: ignore[attr-defined]


# ---------------------------------------------------------------- a scripted "brain"


def system_of(body: dict[str, Any]) -> str:
    content: str = body["messages"][0]["content"]
    return content


def task_of(body: dict[str, Any]) -> str:
    content: str = next(m for m in body["messages"] if m["role"] == "user")["content"]
    return content


def results_of(body: dict[str, Any]) -> list[str]:
    """The tool results the LLM got, without the untrusted-output note before each."""
    note = UNTRUSTED_NOTE + "\n"
    return [m["content"].removeprefix(note) for m in body["messages"] if m["role"] == "tool"]


Rule = Callable[[dict[str, Any]], Reply]


def brain(rules: dict[str, Rule]) -> Callable[[RecordedRequest], Reply]:
    """Answer by who asks (a marker in the system prompt) and where they are."""

    def respond(request: RecordedRequest) -> Reply:
        body = request.body
        for marker, rule in rules.items():
            if marker in system_of(body):
                return rule(body)
        raise AssertionError(f"no rule for system prompt {system_of(body)[:200]!r}")

    return respond


def spawn(task: str, profile_id: str | None = None) -> FakeToolCall:
    args = {"task": task} if profile_id is None else {"task": task, "profile_id": profile_id}
    return FakeToolCall(name="spawn_agent", arguments=args)


def parent_spawning(*calls: FakeToolCall) -> Rule:
    """Spawn on the first call, then answer with what the subagents said."""

    def rule(body: dict[str, Any]) -> Reply:
        results = results_of(body)
        if not results:
            return Reply(tool_calls=list(calls))
        return Reply(text="Parent: " + " | ".join(results))

    return rule


def child_answering(body: dict[str, Any]) -> Reply:
    return Reply(text=f"Child did: {task_of(body)}")


async def run_to_end(navi: Navi, session: str, text: str) -> list[Recorded]:
    seen = []
    with anyio.fail_after(30):
        async for record in run_stream(navi, session, text):
            seen.append(record)
    return seen


def children_of(records: list[Recorded]) -> list[SubagentSpawned]:
    return [r.event for r in records if isinstance(r.event, SubagentSpawned)]


# Sessions of named users: the run checks their tools against their role.
OWNERS = Users(
    [User(id="alice", role="admin", token="a" * 16), User(id="bob", role="admin", token="b" * 16)],
    open_access=False,
)


def settings_for(root: Path, url: str, **overrides: Any) -> Any:
    overrides.setdefault("planning", "off")
    return navi_settings(root, url, **overrides)


# ---------------------------------------------------------------- basics


async def test_a_subagent_without_a_profile_uses_the_parents(tmp_path: Path) -> None:
    respond = brain(
        {SECRETARY_SUB: child_answering, "": parent_spawning(spawn("find otter facts"))}
    )
    async with FakeLLM(responder=respond) as fake:
        async with open_navi(settings_for(tmp_path, fake.url), users=OWNERS, llm=fake) as navi:
            session = await navi.create_session("secretary", user_id="alice")
            seen = await run_to_end(navi, session, "tell me about otters")
            parent = await navi.store.read(session)
            (spawned,) = children_of(parent)
            child = await navi.store.read(spawned.child_stream_id)
        types = [r.type for r in seen]
        assert types.index("subagent.spawned") < types.index("subagent.finished")
        assert types.index("subagent.finished") < types.index("tool.completed")
        assert spawned.task == "find otter facts" and spawned.profile_id == "secretary"
        created = child[0].event
        assert isinstance(created, SessionCreated)
        assert created.parent_stream_id == session and created.user_id == "alice"
        assert created.parent_call_id == spawned.call_id
        started = next(r.event for r in child if isinstance(r.event, RunStarted))
        assert started.mode == "ephemeral" and started.profile_id == "secretary"
        end = child[-1].event
        assert isinstance(end, RunCompleted) and end.content == "Child did: find otter facts"
        finished = next(r.event for r in parent if isinstance(r.event, SubagentFinished))
        assert finished.result == end.content and finished.completed_normally
        result = next(r.event for r in parent if isinstance(r.event, ToolCompleted))
        assert result.output == "Child did: find otter facts"
        assert parent[-1].type == "run.completed"
        assert_well_formed(fold(CONTEXT, parent).as_list())
    child_call = next(b for b in fake.requests if SECRETARY_SUB in system_of(b))
    names = {t["function"]["name"] for t in child_call["tools"]}
    assert "spawn_agent" not in names and "web_search" in names  # subagent_tools
    assert child_call["messages"][-1] == {"role": "user", "content": "find otter facts"}


async def test_a_subagent_with_a_profile_uses_its_model_prompt_tools_and_flags(
    tmp_path: Path,
) -> None:
    respond = brain(
        {
            PLANNER: lambda body: Reply(text="DIRECT"),  # subagent planning is on for it
            RESEARCHER_SUB: child_answering,
            LEAD_MAIN: parent_spawning(spawn("dig", "researcher")),
        }
    )
    async with FakeLLM(responder=respond) as fake:
        settings = settings_for(tmp_path, fake.url, planning="on")
        async with open_navi(settings, env=test_profiles(tmp_path), llm=fake) as navi:
            session = await navi.create_session("lead")
            await run_to_end(navi, session, "research something")
            (spawned,) = children_of(await navi.store.read(session))
            child = await navi.store.read(spawned.child_stream_id)
        assert spawned.profile_id == "researcher"
        started = next(r.event for r in child if isinstance(r.event, RunStarted))
        assert started.profile_id == "researcher"
        assert "plan.status" in [r.type for r in child]  # subagent_planning_enabled
    plans = [b for b in fake.requests if PLANNER in system_of(b)]
    assert [b["model"] for b in plans] == [RESEARCH_MODEL]
    assert "dig" in plans[0]["messages"][-1]["content"]
    child_calls = [b for b in fake.requests if RESEARCHER_SUB in system_of(b)]
    assert [b["model"] for b in child_calls] == [RESEARCH_MODEL]
    loop = child_calls[0]
    assert {t["function"]["name"] for t in loop["tools"]} == {"todo", "scratchpad", "filesystem"}
    parent_calls = [b for b in fake.requests if LEAD_MAIN in system_of(b)]
    assert all(b["model"] == "fake-model:latest" for b in parent_calls)
    assert all("tools" in b for b in parent_calls)  # the lead does not plan (its flag is off)


async def test_an_unknown_profile_fails_the_call_and_starts_nothing(tmp_path: Path) -> None:
    respond = brain({"": parent_spawning(spawn("x", "no_such_profile"))})
    async with FakeLLM(responder=respond) as fake:
        async with open_navi(settings_for(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            seen = await run_to_end(navi, session, "go")
        failed = next(r.event for r in seen if isinstance(r.event, ToolFailed))
        assert "no_such_profile" in failed.error and "secretary" in failed.error
        assert not children_of(seen) and seen[-1].type == "run.completed"


async def test_nested_subagents_link_their_streams(tmp_path: Path) -> None:
    respond = brain(
        {
            RESEARCHER_SUB: child_answering,
            LEAD_SUB: parent_spawning(spawn("the deepest part", "researcher")),
            LEAD_MAIN: parent_spawning(spawn("a part of it")),
        }
    )
    async with FakeLLM(responder=respond) as fake:
        async with open_navi(
            settings_for(tmp_path, fake.url), env=test_profiles(tmp_path), llm=fake
        ) as navi:
            session = await navi.create_session("lead")
            seen = await run_to_end(navi, session, "the whole task")
            (child,) = children_of(await navi.store.read(session))
            child_log = await navi.store.read(child.child_stream_id)
            (grandchild,) = children_of(child_log)
            grandchild_log = await navi.store.read(grandchild.child_stream_id)
        created = grandchild_log[0].event
        assert (
            isinstance(created, SessionCreated)
            and created.parent_stream_id == child.child_stream_id
        )
        assert grandchild_log[-1].type == "run.completed"
        assert child_log[-1].type == "run.completed"
        end = seen[-1].event
        assert isinstance(end, RunCompleted)
        assert end.content == "Parent: Parent: Child did: the deepest part"
        assert len(fake.requests) == 5


# ---------------------------------------------------------------- parallel and isolated


async def test_parallel_subagents_are_isolated(tmp_path: Path) -> None:
    def child(body: dict[str, Any]) -> Reply:
        task = task_of(body)
        if not results_of(body):
            note = FakeToolCall(
                name="scratchpad",
                arguments={"action": "write", "section": "notes", "content": f"notes of {task}"},
            )
            todo = FakeToolCall(name="todo", arguments={"action": "set", "items": [{"text": task}]})
            write = FakeToolCall(
                name="filesystem",
                arguments={"action": "write", "path": f"{task}.txt", "content": task},
            )
            # Both children wait here, so each is surely running while the other is.
            return Reply(tool_calls=[note, todo, write], delay_first=0.3)
        return Reply(text=f"{task} done")

    respond = brain(
        {
            RESEARCHER_SUB: child,
            LEAD_SUB: child,
            LEAD_MAIN: parent_spawning(spawn("alpha"), spawn("beta", "researcher")),
        }
    )
    async with FakeLLM(responder=respond) as fake:
        async with open_navi(
            settings_for(tmp_path, fake.url), env=test_profiles(tmp_path), users=OWNERS, llm=fake
        ) as navi:
            session = await navi.create_session("lead", user_id="bob")
            seen = await run_to_end(navi, session, "two things at once")
            parent = await navi.store.read(session)
            logs = {s.task: await navi.store.read(s.child_stream_id) for s in children_of(parent)}
        assert set(logs) == {"alpha", "beta"}
        # Running at once: each started before the other finished.
        spans = {task: (log[0].timestamp, log[-1].timestamp) for task, log in logs.items()}
        assert spans["alpha"][0] < spans["beta"][1] and spans["beta"][0] < spans["alpha"][1]
        # Scratchpads are each child's own; the parent's stays empty.
        for task, log in logs.items():
            pads = [r.event for r in log if isinstance(r.event, ScratchpadUpdated)]
            assert [p.content for p in pads] == [f"notes of {task}"]
            assert not any(isinstance(r.event, TodoUpdated) for r in log)
            created = log[0].event
            assert isinstance(created, SessionCreated) and created.user_id == "bob"
        assert not any(isinstance(r.event, ScratchpadUpdated) for r in parent)
        # The todo list and the files are the parent session's.
        todos = [r.event for r in parent if isinstance(r.event, TodoUpdated)]
        assert sorted(t.items[0].text for t in todos) == ["alpha", "beta"]
        files = tmp_path / "files" / session
        assert (files / "alpha.txt").read_text() == "alpha"
        assert (files / "beta.txt").read_text() == "beta"
        end = seen[-1].event
        assert isinstance(end, RunCompleted) and "alpha done" in end.content
        assert "beta done" in end.content
    models = {task_of(b): b["model"] for b in fake.requests if LEAD_MAIN not in system_of(b)}
    assert models == {"alpha": "fake-model:latest", "beta": RESEARCH_MODEL}
    last_parent = [b for b in fake.requests if LEAD_MAIN in system_of(b)][-1]
    assert last_parent["model"] == "fake-model:latest"
    assert LEAD_MAIN in system_of(last_parent)


# ---------------------------------------------------------------- ending badly


async def test_a_parent_stop_reaches_every_child(tmp_path: Path) -> None:
    def slow(body: dict[str, Any]) -> Reply:
        return Reply(text="word " * 400, delay=0.02)

    respond = brain(
        {
            RESEARCHER_SUB: slow,
            LEAD_SUB: parent_spawning(spawn("deeper", "researcher")),
            LEAD_MAIN: parent_spawning(spawn("a part")),
        }
    )
    async with FakeLLM(responder=respond) as fake:
        async with open_navi(
            settings_for(tmp_path, fake.url), env=test_profiles(tmp_path), llm=fake
        ) as navi:
            session = await navi.create_session("lead")
            reply = await navi.send(session, "go")
            with anyio.fail_after(20):
                while len(fake.requests) < 3:  # the grandchild is streaming
                    await anyio.sleep(0.02)
                await anyio.sleep(0.1)
                assert await navi.stop(session)
                end = await navi.wait_for_end(session, reply)
            assert isinstance(end.event, RunStopped)
            parent = await navi.store.read(session)
            (child,) = children_of(parent)
            child_log = await navi.store.read(child.child_stream_id)
            (grandchild,) = children_of(child_log)
            grandchild_log = await navi.store.read(grandchild.child_stream_id)
        for log in (parent, child_log, grandchild_log):
            types = [r.type for r in log]
            assert "stop.requested" in types and types[-1] == "run.stopped", types
            assert_well_formed(fold(CONTEXT, log).as_list())
        for log in (parent, child_log):
            finished = next(r.event for r in log if isinstance(r.event, SubagentFinished))
            assert not finished.completed_normally
            failed = next(r.event for r in log if isinstance(r.event, ToolFailed))
            assert failed.reason == "stopped"


async def test_a_child_session_crash_is_a_failed_call_and_the_parent_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await crash_a_child(tmp_path, monkeypatch, "session")


async def test_a_child_run_crash_is_a_failed_call_and_the_parent_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await crash_a_child(tmp_path, monkeypatch, "run")


async def crash_a_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    respond = brain({LEAD_MAIN: parent_spawning(spawn("doomed", "researcher"))})
    async with FakeLLM(responder=respond) as fake:
        async with open_navi(
            settings_for(tmp_path, fake.url), env=test_profiles(tmp_path), llm=fake
        ) as navi:
            real = navi.backend_for
            calls = 0

            async def broken(profile: Any) -> Any:
                # The child's session actor asks first (run.started names the backend),
                # its run next: crash one or the other.
                nonlocal calls
                if profile.id == "researcher":
                    calls += 1
                    if where == "session" or calls > 1:
                        raise RuntimeError("the researcher's backend blew up")
                return await real(profile)

            monkeypatch.setattr(navi, "backend_for", broken)
            session = await navi.create_session("lead")
            seen = await run_to_end(navi, session, "go")
            (child,) = children_of(seen)
            child_log = await navi.store.read(child.child_stream_id)
        if where == "run":
            assert child_log[-1].type == "run.failed"
        else:
            assert not any(r.type in TERMINAL_RUN_EVENTS for r in child_log)
        failed = next(r.event for r in seen if isinstance(r.event, ToolFailed))
        assert failed.name == "spawn_agent" and "blew up" in failed.error
        finished = next(r.event for r in seen if isinstance(r.event, SubagentFinished))
        assert not finished.completed_normally
        end = seen[-1].event
        assert isinstance(end, RunCompleted) and "blew up" in end.content


async def test_iteration_limit_and_timeout_are_not_normal(tmp_path: Path) -> None:
    def looping(body: dict[str, Any]) -> Reply:
        if task_of(body) == "slow":
            return Reply(text="zzz " * 200, delay=0.05)
        return Reply(tool_calls=[FakeToolCall(name="todo", arguments={"action": "read"})])

    respond = brain(
        {
            RESEARCHER_SUB: looping,
            LEAD_MAIN: parent_spawning(spawn("loop", "researcher"), spawn("slow", "researcher")),
        }
    )
    async with FakeLLM(responder=respond) as fake:
        async with open_navi(
            settings_for(tmp_path, fake.url), env=test_profiles(tmp_path), llm=fake
        ) as navi:
            tool = navi.tools.get("spawn_agent")
            tool.subagent_timeout_s = 1.0  # type: ignore[union-attr]
            session = await navi.create_session("lead")
            seen = await run_to_end(navi, session, "go")
            parent = await navi.store.read(session)
            logs = {s.task: await navi.store.read(s.child_stream_id) for s in children_of(parent)}
        finished = {r.event.call_id: r.event for r in seen if isinstance(r.event, SubagentFinished)}
        assert all(not f.completed_normally for f in finished.values())
        loop_end = logs["loop"][-1].event
        assert isinstance(loop_end, RunCompleted) and not loop_end.completed_normally
        slow_end = logs["slow"][-1].event
        assert isinstance(slow_end, RunStopped) and slow_end.reason == "timeout"
        results = [r.event for r in seen if isinstance(r.event, ToolCompleted)]
        assert len(results) == 2
        assert all("did not finish its task normally" in r.output for r in results)
        assert any("ran out of time" in r.output for r in results)
        assert seen[-1].type == "run.completed"


# ---------------------------------------------------------------- crash and resume


def resumable(body: dict[str, Any]) -> Reply:
    """The child: one scratchpad note (a step), then its answer."""
    if not results_of(body):
        note = FakeToolCall(
            name="scratchpad", arguments={"action": "append", "section": "s", "content": "x"}
        )
        return Reply(tool_calls=[note])
    return Reply(text="child finished")


async def test_a_crash_mid_subagent_resumes_under_the_parent(tmp_path: Path) -> None:
    respond = brain(
        {RESEARCHER_SUB: resumable, LEAD_MAIN: parent_spawning(spawn("work", "researcher"))}
    )
    async with FakeLLM(responder=respond) as fake:
        env = test_profiles(tmp_path)
        ref = tmp_path / "ref"
        async with open_navi(settings_for(ref, fake.url), env=env, llm=fake) as navi:
            session = await navi.create_session("lead")
            await run_to_end(navi, session, "go")
            everything = await navi.store.read_all()
        parent_log = [r for r in everything if r.stream_id == session]
        first = next(r.position for r in parent_log if r.type == "tool.requested")
        last = next(r.position for r in parent_log if r.type == "tool.completed")
        for cut_at in range(first, last):
            root = tmp_path / f"cut{cut_at}"
            root.mkdir()
            url = f"sqlite:///{root}/navi.db"
            kept: dict[str, list[Recorded]] = {}
            for record in everything:
                if record.position <= cut_at:
                    kept.setdefault(record.stream_id, []).append(record)
            async with store_for_url(url) as store:
                for stream, records in kept.items():
                    new = [NewEvent(event=r.event, run_id=r.run_id) for r in records]
                    await store.append(stream, new, expected_seq=0)
            settings = settings_for(root, fake.url, database_url=url, resume_on_start=True)
            async with open_navi(settings, env=env, llm=fake) as navi:
                with anyio.fail_after(20):
                    while (records := await navi.store.read(session))[-1].type not in (
                        TERMINAL_RUN_EVENTS
                    ):
                        await anyio.sleep(0.02)
                (spawned,) = children_of(records)  # re-attached, never spawned again
                child = await navi.store.read(spawned.child_stream_id)
                streams = {r.stream_id for r in await navi.store.read_all()}
            assert records[-1].type == "run.completed", (cut_at, [r.type for r in records])
            assert streams == {session, spawned.child_stream_id}
            assert [r.type for r in child].count("run.started") == 1
            assert sum(r.type in TERMINAL_RUN_EVENTS for r in child) == 1
            notes = [r for r in child if isinstance(r.event, ScratchpadUpdated)]
            assert len(notes) <= 1  # the child's completed step never ran twice
            end = records[-1].event
            assert isinstance(end, RunCompleted)
            assert sum(r.type == "subagent.finished" for r in records) == 1
            assert_well_formed(fold(CONTEXT, records).as_list())


# ---------------------------------------------------------------- over the WebSocket


async def test_subagent_frames_reach_the_parents_websocket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx
    from websockets.asyncio.client import connect

    from profiles import ProfileRegistry
    from tests.support.navi_server import navi_server_for

    env = test_profiles(tmp_path)
    load = ProfileRegistry.from_environ.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(
        ProfileRegistry, "from_environ", classmethod(lambda cls, environ=None: load(cls, env))
    )

    def grandchild(body: dict[str, Any]) -> Reply:
        if not results_of(body):
            note = FakeToolCall(
                name="scratchpad", arguments={"action": "write", "section": "s", "content": "n"}
            )
            return Reply(thinking="Let me note it.", tool_calls=[note])
        return Reply(text="deep result")

    respond = brain(
        {
            RESEARCHER_SUB: grandchild,
            LEAD_SUB: parent_spawning(spawn("deeper", "researcher")),
            LEAD_MAIN: parent_spawning(spawn("a part")),
        }
    )
    with navi_server_for(tmp_path / "server") as server:
        server.fake_llm.responder = respond
        async with httpx.AsyncClient(base_url=server.url) as http:
            created = await http.post("/sessions", json={"profile_id": "lead"})
            session = created.json()["session_id"]
        frames = []
        async with connect(f"{server.ws_url}/ws/sessions/{session}") as ws:
            await ws.send(json.dumps({"type": "message", "content": "the whole task"}))
            with anyio.fail_after(30):
                while True:
                    frame = json.loads(await ws.recv())
                    frames.append(frame)
                    if frame["type"] == "stream_end":
                        break
    tools = [
        (f["type"], f["tool"], f.get("is_subagent", False))
        for f in frames
        if f["type"] in ("tool_started", "tool_call")
    ]
    assert tools == [
        ("tool_started", "spawn_agent", False),
        ("tool_started", "spawn_agent", True),  # the child spawns the grandchild
        ("tool_started", "scratchpad", True),  # the grandchild's own step
        ("tool_call", "scratchpad", True),
        ("tool_call", "spawn_agent", True),
        ("tool_call", "spawn_agent", False),
    ]
    thinking = next(f for f in frames if f["type"] == "turn_thinking")
    assert thinking["is_subagent"] and thinking["thinking"] == "Let me note it."
    sub_ids = {f["subagent_id"] for f in frames if f.get("is_subagent")}
    assert len(sub_ids) == 2 and session not in sub_ids  # child and grandchild streams
    assert frames[-1]["content"] == "Parent: Parent: deep result"
    assert not any(f["type"] == "stream_delta" and f.get("is_subagent") for f in frames)


async def test_a_subagent_session_takes_no_message_of_its_own(tmp_path: Path) -> None:
    respond = brain({SECRETARY_SUB: child_answering, "": parent_spawning(spawn("a task"))})
    async with (
        FakeLLM(responder=respond) as fake,
        open_navi(settings_for(tmp_path, fake.url), llm=fake) as navi,
    ):
        session = await navi.create_session("secretary")
        await run_to_end(navi, session, "go")
        (child,) = children_of(await navi.store.read(session))
        before = await navi.store.last_seq(child.child_stream_id)
        with pytest.raises(SessionError, match="subagent"):
            await navi.send(child.child_stream_id, "hello child")
        assert await navi.store.last_seq(child.child_stream_id) == before
