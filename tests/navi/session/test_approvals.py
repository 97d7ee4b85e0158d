"""Approvals end to end: real SQLite, the fake LLM server over real HTTP, the real run
loop. A call whose policy asks waits, durably, for a person's decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from events.envelope import Recorded
from events.settings_events import SettingsUpdated
from events.types import (
    RunStopped,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCompleted,
    ToolFailed,
)
from navi.app import Navi
from navi.run.state import RunState
from navi.session.errors import AlreadyDecided, ApprovalNotFound, BadInput
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import FakeToolCall, Reply
from tests.support.helpers import wait_for_events
from tests.support.navi_app import navi_settings, open_navi

pytestmark = pytest.mark.anyio

WRITE = FakeToolCall(
    name="filesystem", arguments={"action": "write", "path": "note.txt", "content": "hi"}
)
LIST = FakeToolCall(name="filesystem", arguments={"action": "list", "path": "."})


def asking(tmp_path: Path, url: str, **overrides: Any) -> Any:
    """Settings with the tools' own defaults (the test rig's "auto" off)."""
    return navi_settings(tmp_path, url, planning="off", tool_approval="", **overrides)


def events_of(records: list[Recorded], cls: type) -> list[Any]:
    return [r.event for r in records if isinstance(r.event, cls)]


async def test_a_write_waits_for_approval_then_runs_once(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(tool_calls=[LIST, WRITE]), Reply(text="Written."))
        async with open_navi(asking(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            await navi.send(session, "write a note")
            records = await wait_for_events(navi.store, session, "tool.approval_requested")
            (request,) = events_of(records, ToolApprovalRequested)
            assert request.name == "filesystem" and request.arguments["action"] == "write"
            assert request.policy == "filesystem's default"
            # The read-only call ran before it; the write did not run.
            assert [e.name for e in events_of(records, ToolCompleted)] == ["filesystem"]
            assert not (tmp_path / "files" / session / "note.txt").exists()
            assert len(fake.requests) == 1
            actor_state = await _state(navi, session)
            assert actor_state is RunState.AWAITING_APPROVAL

            await navi.decide(session, request.call_id, approved=True, by="local")
            records = await wait_for_events(navi.store, session, "run.completed")
            # The log orders what happened: the LLM was not called while the call waited.
            kinds = [r.type for r in records]
            waited = kinds[
                kinds.index("tool.approval_requested") : kinds.index("tool.approval_decided")
            ]
            assert "llm.requested" not in waited and len(fake.requests) == 2
            (decision,) = events_of(records, ToolApprovalDecided)
            assert decision.approved and decision.by == "local" and decision.scope == "once"
            assert (tmp_path / "files" / session / "note.txt").read_text() == "hi"
            assert len(events_of(records, ToolCompleted)) == 2
            with pytest.raises(AlreadyDecided):
                await navi.decide(session, request.call_id, approved=False, by="local")
            with pytest.raises(ApprovalNotFound):
                await navi.decide(session, "no-such-call", approved=True, by="local")


async def test_a_denial_with_a_reason_reaches_the_llm(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(tool_calls=[WRITE]), Reply(text="Understood, I will not write."))
        async with open_navi(asking(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            await navi.send(session, "write a note")
            records = await wait_for_events(navi.store, session, "tool.approval_requested")
            (request,) = events_of(records, ToolApprovalRequested)
            await navi.decide(
                session, request.call_id, approved=False, by="local", reason="not in there"
            )
            records = await wait_for_events(navi.store, session, "run.completed")
            (failed,) = events_of(records, ToolFailed)
            assert failed.reason == "denied"
            assert failed.error == "The user declined this call: not in there"
            assert not (tmp_path / "files" / session / "note.txt").exists()
        tool_messages = [m for m in fake.requests[1]["messages"] if m["role"] == "tool"]
        assert "The user declined this call: not in there" in tool_messages[0]["content"]


async def test_approve_for_the_session_runs_later_calls_without_asking(tmp_path: Path) -> None:
    second = FakeToolCall(
        name="filesystem", arguments={"action": "write", "path": "b.txt", "content": "b"}
    )
    async with FakeLLM() as fake:
        fake.script(
            Reply(tool_calls=[WRITE]),
            Reply(text="One."),
            Reply(tool_calls=[second]),
            Reply(text="Two."),
        )
        async with open_navi(asking(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            await navi.send(session, "write a note")
            records = await wait_for_events(navi.store, session, "tool.approval_requested")
            (request,) = events_of(records, ToolApprovalRequested)
            await navi.decide(session, request.call_id, approved=True, scope="session", by="ann")
            await wait_for_events(navi.store, session, "run.completed")
            await navi.send(session, "and another")
            records = await wait_for_events(navi.store, session, "run.completed", count=2)
            assert len(events_of(records, ToolApprovalRequested)) == 1
            assert (tmp_path / "files" / session / "b.txt").read_text() == "b"


async def test_a_profile_that_denies_a_tool(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    _profile(profiles, "careful", {"filesystem": "deny"})
    async with FakeLLM() as fake:
        fake.script(Reply(tool_calls=[WRITE]), Reply(text="Not allowed."))
        env = {"PROFILES_DIR": str(profiles)}
        async with open_navi(asking(tmp_path, fake.url), env=env, llm=fake) as navi:
            session = await navi.create_session("careful")
            await navi.send(session, "write a note")
            records = await wait_for_events(navi.store, session, "run.completed")
            assert not events_of(records, ToolApprovalRequested)
            (failed,) = events_of(records, ToolFailed)
            assert failed.reason == "denied" and "profile careful" in failed.error


async def test_the_users_own_defaults_apply(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(tool_calls=[WRITE]), Reply(text="Written at once."))
        async with open_navi(asking(tmp_path, fake.url), llm=fake) as navi:
            assert navi.user_settings is not None
            await navi.user_settings.update(
                "local", SettingsUpdated(tool_policy={"filesystem": "auto"})
            )
            session = await navi.create_session("secretary")
            await navi.send(session, "write a note")
            records = await wait_for_events(navi.store, session, "run.completed")
            assert not events_of(records, ToolApprovalRequested)
            assert (tmp_path / "files" / session / "note.txt").read_text() == "hi"


async def test_a_stop_while_waiting_ends_the_run(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(tool_calls=[WRITE]))
        async with open_navi(asking(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            await navi.send(session, "write a note")
            await wait_for_events(navi.store, session, "tool.approval_requested")
            assert await navi.stop(session)
            records = await wait_for_events(navi.store, session, "run.stopped")
            (failed,) = events_of(records, ToolFailed)
            assert failed.reason == "stopped"
            assert isinstance(records[-1].event, RunStopped)


async def test_no_decision_within_the_timeout_denies(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(tool_calls=[WRITE]), Reply(text="Nobody answered."))
        async with open_navi(asking(tmp_path, fake.url, approval_timeout_s=0.3), llm=fake) as navi:
            session = await navi.create_session("secretary")
            await navi.send(session, "write a note")
            records = await wait_for_events(navi.store, session, "run.completed")
            (decision,) = events_of(records, ToolApprovalDecided)
            assert not decision.approved and decision.by == "navi"
            (failed,) = events_of(records, ToolFailed)
            assert failed.reason == "denied" and "within 0.3 s" in failed.error


async def test_the_wait_survives_a_restart_and_the_call_runs_once(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(tool_calls=[WRITE]), Reply(text="Written after the restart."))
        settings = asking(tmp_path, fake.url)
        async with open_navi(settings, llm=fake) as navi:
            session = await navi.create_session("secretary")
            await navi.send(session, "write a note")
            records = await wait_for_events(navi.store, session, "tool.approval_requested")
            (request,) = events_of(records, ToolApprovalRequested)
        # Navi is gone; a new one resumes the run: it is still waiting, not asked again.
        resuming = navi_settings(tmp_path, fake.url, planning="off", tool_approval="")
        async with open_navi(_resume(resuming), llm=fake) as navi:
            with anyio.fail_after(10):
                while await _state(navi, session) is not RunState.AWAITING_APPROVAL:
                    await anyio.sleep(0.02)
            records = await navi.store.read(session)
            assert len(events_of(records, ToolApprovalRequested)) == 1
            assert not events_of(records, ToolCompleted)
            await navi.decide(session, request.call_id, approved=True, by="local")
            records = await wait_for_events(navi.store, session, "run.completed")
            # Over the whole resumed run (not only a moment of it): asked once, run once.
            assert len(events_of(records, ToolApprovalRequested)) == 1
            (done,) = events_of(records, ToolCompleted)
            assert done.call_id == request.call_id
            assert not events_of(records, ToolFailed)
            assert (tmp_path / "files" / session / "note.txt").read_text() == "hi"


# ---------------------------------------------------------------- helpers


async def _state(navi: Navi, session: str) -> RunState:
    from navi.run.state import state_at

    return state_at(await navi.store.read(session))


def _resume(settings: Any) -> Any:
    import msgspec

    return msgspec.structs.replace(settings, resume_on_start=True)


def _profile(root: Path, profile_id: str, policy: dict[str, str]) -> None:
    import json

    folder = root / profile_id
    folder.mkdir(parents=True)
    config = {
        "id": profile_id,
        "name": profile_id.title(),
        "enabled_tools": ["filesystem"],
        "tool_policy": policy,
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "system_prompt.txt").write_text("You are careful.")


async def test_a_subagents_request_is_decided_through_its_top_level_session(
    tmp_path: Path,
) -> None:
    profiles = tmp_path / "profiles"
    tools = ["spawn_agent", "filesystem"]
    folder = profiles / "lead"
    folder.mkdir(parents=True)
    config = {"id": "lead", "name": "Lead", "enabled_tools": tools, "subagent_tools": tools}
    (folder / "config.json").write_text(__import__("json").dumps(config))
    (folder / "system_prompt.txt").write_text("You lead.")
    spawn = FakeToolCall(name="spawn_agent", arguments={"task": "write the note"})
    async with FakeLLM() as fake:
        fake.script(
            Reply(tool_calls=[spawn]),  # the parent
            Reply(tool_calls=[WRITE]),  # the subagent
            Reply(text="Child: written."),
            Reply(text="Parent: the child wrote it."),
        )
        env = {"PROFILES_DIR": str(profiles)}
        async with open_navi(asking(tmp_path, fake.url), env=env, llm=fake) as navi:
            session = await navi.create_session("lead")
            await navi.send(session, "delegate the note")
            records = await wait_for_events(navi.store, session, "subagent.spawned")
            child = next(r.event.child_stream_id for r in records if r.type == "subagent.spawned")
            child_records = await wait_for_events(navi.store, child, "tool.approval_requested")
            (request,) = events_of(child_records, ToolApprovalRequested)
            # Pending, seen from the top-level session as the REST route lists it.
            from navi.server.approvals import awaiting
            from tests.support.frames import wire

            (frame,) = wire(await awaiting(navi.store, session))
            assert frame["call_id"] == request.call_id and frame["is_subagent"] is True
            assert frame["subagent_id"] == frame["stream_id"] == child
            # The subagent's calls are named after its stream: no sibling's nor its
            # parent's call has the same id.
            assert request.call_id.startswith(f"call_{child.replace('-', '')}_")
            assert frame["session_scope"]["label"] == "Allow file writes for this subagent"
            # A stream id that is not one, or not of this tree: nothing is decided.
            with pytest.raises(BadInput):
                await navi.decide(
                    session, request.call_id, approved=True, by="local", stream_id="../x"
                )
            with pytest.raises(ApprovalNotFound):
                await navi.decide(
                    session, request.call_id, approved=True, by="local", stream_id=session
                )
            recorded_in = await navi.decide(
                session, request.call_id, approved=True, by="local", stream_id=child
            )
            assert recorded_in == child
            await wait_for_events(navi.store, session, "run.completed")
            assert (tmp_path / "files" / session / "note.txt").read_text() == "hi"


async def test_the_history_shows_who_decided_and_how_long_the_call_waited(
    tmp_path: Path,
) -> None:
    from projections import messages as messages_projection
    from projections.fold import fold

    async with FakeLLM() as fake:
        fake.script(Reply(tool_calls=[WRITE]), Reply(text="Written."))
        async with open_navi(asking(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            await navi.send(session, "write a note")
            records = await wait_for_events(navi.store, session, "tool.approval_requested")
            (request,) = events_of(records, ToolApprovalRequested)
            await anyio.sleep(0.3)
            await navi.decide(
                session, request.call_id, approved=True, scope="session", by="ann", reason="ok"
            )
            records = await wait_for_events(navi.store, session, "run.completed")
    history = fold(messages_projection.MESSAGES, records).messages()
    (tool,) = [m for m in history if m.role == "tool"]
    assert tool.approval is not None
    assert (tool.approval.approved, tool.approval.by, tool.approval.scope) == (
        True,
        "ann",
        "session",
    )
    assert tool.approval.reason == "ok" and tool.approval.waited_seconds >= 0.3
