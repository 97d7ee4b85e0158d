"""The agent run end to end: real SQLite, the fake LLM server over real HTTP."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from events.types import (
    LLMCompleted,
    LLMWaiting,
    RunCompleted,
    RunStopped,
    ToolCompleted,
    ToolFailed,
    UserMessage,
)
from navi.app import Navi
from navi.session.errors import BadInput, RunActive, SessionNotFound
from projections import messages as messages_projection
from projections.context import CONTEXT
from projections.fold import fold
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import FakeToolCall, Reply
from tests.support.helpers import free_port, wait_for_events
from tests.support.navi_app import navi_settings, open_navi, run_stream
from tests.support.well_formed import assert_well_formed

pytestmark = pytest.mark.anyio


async def types_of(navi: Navi, session: str) -> list[str]:
    return [r.type for r in await navi.store.read(session)]


async def run_to_end(navi: Navi, session: str, text: str) -> list[str]:
    seen = []
    with anyio.fail_after(20):
        async for record in run_stream(navi, session, text):
            seen.append(record.type)
    return seen


async def test_a_plain_question_streams_and_completes(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(thinking="Let me think.", text="Hello there, friend."))
        async with open_navi(navi_settings(tmp_path, fake.url, planning="off"), llm=fake) as navi:
            session = await navi.create_session("secretary")
            seen = await run_to_end(navi, session, "Hi!")
            assert seen[:2] == ["user.message", "run.started"]
            assert "llm.thinking" in seen and "llm.text" in seen
            assert seen[-2:] == ["llm.completed", "run.completed"]
            records = await navi.store.read(session)
            msgs = fold(messages_projection.MESSAGES, records).messages()
            assert [(m.role, m.content) for m in msgs] == [
                ("user", "Hi!"),
                ("assistant", "Hello there, friend."),
            ]
            assert msgs[1].thinking == "Let me think."
        sent = fake.requests[0]
        assert sent["messages"][0]["role"] == "system"
        assert "---" in sent["messages"][0]["content"]  # persona --- profile prompt
        assert sent["messages"][-1] == {"role": "user", "content": "Hi!"}
        assert sent["tools"], "the profile's tools are offered"


async def test_tool_calls_run_and_their_results_go_back_paired(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(
            Reply(
                tool_calls=[
                    FakeToolCall(
                        name="filesystem",
                        arguments={"action": "write", "path": "note.txt", "content": "hi"},
                    ),
                    FakeToolCall(name="filesystem", arguments={"action": "list", "path": "."}),
                ]
            ),
            Reply(text="I wrote note.txt."),
        )
        async with open_navi(navi_settings(tmp_path, fake.url, planning="off"), llm=fake) as navi:
            session = await navi.create_session("secretary")
            seen = await run_to_end(navi, session, "write a note")
            assert seen.count("tool.requested") == 2 and seen.count("tool.completed") == 2
            assert (tmp_path / "files" / session / "note.txt").read_text() == "hi"
            records = await navi.store.read(session)
            context = fold(CONTEXT, records).as_list()
            assert_well_formed(context)
        second = fake.requests[1]["messages"]
        assistant = next(m for m in second if m.get("tool_calls"))
        results = [m for m in second if m["role"] == "tool"]
        assert len(assistant["tool_calls"]) == 2 and len(results) == 2
        assert all(r["tool_name"] == "filesystem" for r in results)
        assert "note.txt" in results[1]["content"]


async def test_unknown_tools_and_bad_arguments_fail_the_call_not_the_run(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(
            Reply(
                tool_calls=[
                    FakeToolCall(name="teleport", arguments={"to": "mars"}),
                    FakeToolCall(name="filesystem", arguments={"action": 42}),
                ]
            ),
            Reply(text="Sorry, I cannot do that."),
        )
        async with open_navi(navi_settings(tmp_path, fake.url, planning="off"), llm=fake) as navi:
            session = await navi.create_session()
            await run_to_end(navi, session, "go to mars")
            failed = [
                r.event for r in await navi.store.read(session) if isinstance(r.event, ToolFailed)
            ]
            assert [f.name for f in failed] == ["teleport", "filesystem"]
            assert "unknown tool 'teleport'" in failed[0].error
            assert "Available tools" in failed[0].error
            assert "invalid arguments" in failed[1].error
            assert (await types_of(navi, session))[-1] == "run.completed"
        tool_messages = [m for m in fake.requests[1]["messages"] if m["role"] == "tool"]
        assert "unknown tool 'teleport'" in tool_messages[0]["content"]


async def test_a_second_message_during_a_run_is_refused_or_queued(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(text="slow answer " * 20, delay=0.02), Reply(text="second answer"))
        async with open_navi(navi_settings(tmp_path, fake.url, planning="off"), llm=fake) as navi:
            session = await navi.create_session()
            first = await navi.send(session, "first")
            with pytest.raises(RunActive, match="already active"):
                await navi.send(session, "interrupting")
            queued = await navi.send(session, "later", queue=True)
            assert queued.queued
            await navi.wait_for_end(session, first)
            with anyio.fail_after(10):
                while (await types_of(navi, session)).count("run.completed") < 2:
                    await anyio.sleep(0.02)
            users = [
                r.event.text
                for r in await navi.store.read(session)
                if isinstance(r.event, UserMessage)
            ]
            assert users == ["first", "later"]  # never interleaved into the first turn


async def test_stop_mid_stream_ends_the_run_and_closes_the_stream(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(text="word " * 500, delay=0.01))
        async with open_navi(navi_settings(tmp_path, fake.url, planning="off"), llm=fake) as navi:
            session = await navi.create_session()
            reply = await navi.send(session, "tell me a long story")
            with anyio.fail_after(10):
                async for record in navi.store.subscribe(session, after_seq=reply.after_seq):
                    if record.type == "llm.text":
                        assert await navi.stop(session)
                        break
                end = await navi.wait_for_end(session, reply)
            assert isinstance(end.event, RunStopped)
            seen = await types_of(navi, session)
            assert "stop.requested" in seen and "llm.completed" not in seen
            assert not await navi.stop(session)  # nothing left to stop
            with anyio.fail_after(5):
                while fake.disconnects < 1:
                    await anyio.sleep(0.01)


@pytest.mark.slow  # user tools and code_exec run in bubblewrap
async def test_stop_during_a_tool_fails_the_open_call_with_stopped(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(
            Reply(
                tool_calls=[
                    FakeToolCall(
                        name="code_exec", arguments={"code": "import time; time.sleep(30)"}
                    )
                ]
            )
        )
        async with open_navi(navi_settings(tmp_path, fake.url, planning="off"), llm=fake) as navi:
            session = await navi.create_session("server_admin")
            reply = await navi.send(session, "run something slow")
            with anyio.fail_after(15):
                async for record in navi.store.subscribe(session, after_seq=reply.after_seq):
                    if record.type == "tool.started":
                        await anyio.sleep(0.2)
                        await navi.stop(session)
                        break
                end = await navi.wait_for_end(session, reply)
            assert isinstance(end.event, RunStopped)
            failed = [
                r.event for r in await navi.store.read(session) if isinstance(r.event, ToolFailed)
            ]
            assert [f.reason for f in failed] == ["stopped"]
            context = fold(CONTEXT, await navi.store.read(session)).as_list()
            assert_well_formed(context)


async def test_the_iteration_limit_ends_the_run_not_normally(tmp_path: Path) -> None:
    call = FakeToolCall(name="todo", arguments={"action": "read"})
    async with FakeLLM(default=Reply(tool_calls=[call])) as fake:
        settings = navi_settings(tmp_path, fake.url, planning="off")
        async with open_navi(settings, llm=fake) as navi:
            profile = navi.profiles.get("secretary")
            import msgspec

            navi.profiles._profiles["secretary"] = msgspec.structs.replace(
                profile, max_iterations=3
            )
            session = await navi.create_session("secretary")
            await run_to_end(navi, session, "loop forever")
            records = await navi.store.read(session)
            end = records[-1].event
            assert isinstance(end, RunCompleted) and not end.completed_normally
            assert "limit" in end.content
            assert sum(isinstance(r.event, LLMCompleted) for r in records) == 3
        budget = [
            m["content"]
            for m in fake.requests[-1]["messages"]
            if m["role"] == "system" and "Iteration budget" in m["content"]
        ]
        assert budget, "the remaining budget is injected near the limit"


async def test_a_dead_llm_server_leaves_the_run_waiting_with_a_clear_message(
    tmp_path: Path,
) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings = navi_settings(tmp_path, url, llm_retries=1, planning="off", llm_retry_backoff_s=0.05)
    async with open_navi(settings) as navi:
        session = await navi.create_session()
        await navi.send(session, "hello?")
        records = await wait_for_events(navi.store, session, "llm.waiting")
        seen = [r.type for r in records]
        assert seen.count("llm.failed") == 2 and "run.failed" not in seen
        waiting = records[-1].event
        assert isinstance(waiting, LLMWaiting) and url.split("//")[1] in waiting.error
        # The session lives on: a stop ends the wait, and the next message is a new turn.
        assert await navi.stop(session)
        await wait_for_events(navi.store, session, "run.stopped")
        assert (await navi.send(session, "again")).run_id


async def test_bad_input_is_refused_and_loses_nothing(tmp_path: Path) -> None:
    async with (
        FakeLLM() as fake,
        open_navi(navi_settings(tmp_path, fake.url, planning="off"), llm=fake) as navi,
    ):
        session = await navi.create_session()
        before = await navi.store.last_seq(session)
        with pytest.raises(BadInput, match="must not be empty"):
            await navi.send(session, "   ")
        with pytest.raises(BadInput, match="not valid base64"):
            await navi.send(session, "look", images=("%%%not base64%%%",))
        with pytest.raises(SessionNotFound):
            await navi.send("no-such-session", "hi")
        assert await navi.store.last_seq(session) == before


async def test_switch_profile_takes_effect_at_the_next_llm_call(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(
            Reply(
                tool_calls=[
                    FakeToolCall(name="switch_profile", arguments={"profile_id": "smart_home"})
                ]
            ),
            Reply(text="Now in smart home mode."),
        )
        async with open_navi(navi_settings(tmp_path, fake.url, planning="off"), llm=fake) as navi:
            session = await navi.create_session("secretary")
            seen = await run_to_end(navi, session, "turn on the lights")
            assert "profile.switched" in seen
            completed = [
                r.event
                for r in await navi.store.read(session)
                if isinstance(r.event, ToolCompleted)
            ]
            assert "smart_home" in completed[0].output
            first_prompt = fake.requests[0]["messages"][0]["content"]
            second_prompt = fake.requests[1]["messages"][0]["content"]
            assert first_prompt != second_prompt
            assert navi.profiles.get("smart_home").system_prompt in second_prompt
