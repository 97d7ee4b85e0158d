"""The session actor's command table (navi/session/actor.py ``COMMANDS``), walked: every
message type its mailbox takes, against a session that does not exist, a deleted one and
a live one (real SQLite, the in-process fake LLM)."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest

from actors import ChildFailed, ChildStopped
from navi.app import Navi
from navi.session import messages as m
from navi.session.actor import COMMANDS, SessionActor
from navi.session.errors import (
    ApprovalNotFound,
    NotWaitingForLLM,
    SessionError,
    SessionNotFound,
)
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import Reply
from tests.support.navi_app import navi_settings, open_navi

pytestmark = pytest.mark.anyio

# The messages that are answers or a child's work order, not requests to a session.
NOT_REQUESTS = {m.RunStartedReply, m.Refusal, m.SubtaskStarted, m.Drive}

# One message of each type the table takes.
SAMPLES: dict[type, Any] = {
    m.Create: m.Create(profile_id="secretary"),
    m.StartSubtask: m.StartSubtask(
        task="t", profile_id="secretary", parent_stream_id="p", parent_call_id="c"
    ),
    m.Send: m.Send(text="hello"),
    m.StopRun: m.StopRun(),
    m.Decide: m.Decide(call_id="nope", approved=True),
    m.WaitingOn: m.WaitingOn(call_id="nope"),
    m.SpawnSubagent: m.SpawnSubagent(child_id="00000000-0000-4000-8000-000000000001"),
    m.Recompress: m.Recompress(),
    m.TryAgain: m.TryAgain(),
    m.SwitchProfile: m.SwitchProfile(profile_id="secretary"),
    m.ChooseModel: m.ChooseModel(model="other"),
    m.Pin: m.Pin(),
    m.Rename: m.Rename(title="  A title  "),
    m.Delete: m.Delete(),
    ChildStopped: ChildStopped("run-0", "ended"),
    ChildFailed: ChildFailed("run-0", RuntimeError("boom"), "stop", 0),
}


def test_every_request_type_has_a_command() -> None:
    requests = {
        cls
        for _, cls in inspect.getmembers(m, inspect.isclass)
        if dataclasses.is_dataclass(cls) and cls.__module__ == m.__name__
    } - NOT_REQUESTS
    assert requests <= COMMANDS.keys()
    assert COMMANDS.keys() == SAMPLES.keys()


async def _actor(navi: Navi, session_id: str) -> Any:
    return await navi.sessions.system.spawn(
        SessionActor(session_id, navi.sessions.deps), session_id
    )


@pytest.mark.parametrize("kind", list(SAMPLES), ids=lambda k: k.__name__)
async def test_a_session_that_does_not_exist_refuses_or_ignores(tmp_path: Path, kind: type) -> None:
    command = COMMANDS[kind]
    async with FakeLLM() as fake, open_navi(navi_settings(tmp_path, fake.url), llm=fake) as navi:
        ref = await _actor(navi, navi.sessions.deps.new_id())
        reply = await ref.ask(SAMPLES[kind], timeout=10)
        if command.notice:
            assert reply is None
        elif command.needs_session:
            assert isinstance(reply, m.Refusal) and isinstance(reply.error, SessionNotFound)
        else:  # a request that creates the session
            assert not isinstance(reply, m.Refusal)


@pytest.mark.parametrize("kind", list(SAMPLES), ids=lambda k: k.__name__)
async def test_a_deleted_session_refuses_every_request(tmp_path: Path, kind: type) -> None:
    command = COMMANDS[kind]
    async with FakeLLM() as fake, open_navi(navi_settings(tmp_path, fake.url), llm=fake) as navi:
        session = await navi.create_session("secretary")
        await navi.sessions.ask(session, m.Delete())
        ref = await navi.sessions.ref(session)
        reply = await ref.ask(SAMPLES[kind], timeout=10)
        if command.notice:
            assert reply is None
        elif command.needs_session:
            assert isinstance(reply, m.Refusal) and isinstance(reply.error, SessionNotFound)


LIVE_ANSWERS: dict[type, Any] = {
    m.Create: lambda r: isinstance(r, m.Refusal) and "already exists" in str(r.error),
    m.Send: lambda r: isinstance(r, m.RunStartedReply) and not r.queued,
    m.StopRun: lambda r: r is False,  # no run is going
    m.Decide: lambda r: isinstance(r, m.Refusal) and isinstance(r.error, ApprovalNotFound),
    m.WaitingOn: lambda r: r == (),
    m.SpawnSubagent: lambda r: r.name == SAMPLES[m.SpawnSubagent].child_id,
    m.Recompress: lambda r: isinstance(r, m.Refusal) and "nothing to summarise" in str(r.error),
    m.TryAgain: lambda r: isinstance(r, m.Refusal) and isinstance(r.error, NotWaitingForLLM),
    m.SwitchProfile: lambda r: r == "secretary",
    m.ChooseModel: lambda r: r == "other",
    m.Pin: lambda r: r is True,
    m.Rename: lambda r: r is None,
    m.Delete: lambda r: r is None,
    ChildStopped: lambda r: r is None,
    ChildFailed: lambda r: r is None,
}


@pytest.mark.parametrize(
    "kind", [k for k in SAMPLES if k is not m.StartSubtask], ids=lambda k: k.__name__
)
async def test_a_live_session_answers_every_request(tmp_path: Path, kind: type) -> None:
    async with FakeLLM() as fake, open_navi(navi_settings(tmp_path, fake.url), llm=fake) as navi:
        fake.script(Reply(text="Hi."))
        session = await navi.create_session("secretary")
        ref = await navi.sessions.ref(session)
        reply = await ref.ask(SAMPLES[kind], timeout=10)
        assert LIVE_ANSWERS[kind](reply), reply
        if isinstance(reply, m.RunStartedReply):
            await navi.wait_for_end(session, reply)


async def test_a_subagent_session_refuses_a_user_message(tmp_path: Path) -> None:
    async with FakeLLM() as fake, open_navi(navi_settings(tmp_path, fake.url), llm=fake) as navi:
        session_id = navi.sessions.deps.new_id()
        ref = await _actor(navi, session_id)
        created = m.Create(profile_id="secretary", parent_stream_id="p", parent_call_id="c")
        assert await ref.ask(created, timeout=10) == session_id
        reply = await ref.ask(m.Send(text="hi"), timeout=10)
        assert isinstance(reply, m.Refusal) and isinstance(reply.error, SessionError)
        assert "subagent" in str(reply.error)
