"""Recovery continues the run (``SessionActor.on_start``): a session actor that starts
on a log with an open run goes on with it, whoever started the actor; and a run asked to
leave (a shutdown) leaves at its wait (``Waits``), as a crash would leave it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from events.envelope import NewEvent
from events.types import RunCompleted, RunStarted, ToolApprovalRequested, UserMessage
from navi.session.run_actor import Waits
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import FakeToolCall, Reply
from tests.support.helpers import wait_for_events
from tests.support.navi_app import navi_settings, open_navi

pytestmark = pytest.mark.anyio

WRITE = FakeToolCall(
    name="filesystem", arguments={"action": "write", "path": "note.txt", "content": "hi"}
)


async def test_a_run_left_waiting_goes_on_when_its_session_is_next_used(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(tool_calls=[WRITE]), Reply(text="Written."))
        # No start-up scan: only the session's own recovery can continue the run.
        settings = navi_settings(
            tmp_path, fake.url, planning="off", tool_approval="", resume_on_start=False
        )
        async with open_navi(settings, llm=fake) as navi:
            session = await navi.create_session("secretary")
            await navi.send(session, "write a note")
            records = await wait_for_events(navi.store, session, "tool.approval_requested")
            (request,) = [r.event for r in records if isinstance(r.event, ToolApprovalRequested)]
        # Navi shut down while the run waited: the log says it still waits.
        async with open_navi(settings, llm=fake) as navi:
            head = (await navi.store.read(session))[-1]
            assert head.type == "tool.approval_requested"
            # The decision's ask starts the actor; its recovery continues the run.
            await navi.decide(session, request.call_id, approved=True, by="local")
            records = await wait_for_events(navi.store, session, "run.completed")
            assert [r.type for r in records].count("tool.approval_requested") == 1
            assert (tmp_path / "files" / session / "note.txt").read_text() == "hi"


async def test_a_session_started_by_the_manager_continues_its_open_run(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(text="One."), Reply(text="Two."))
        settings = navi_settings(tmp_path, fake.url, planning="off", resume_on_start=False)
        async with open_navi(settings, llm=fake) as navi:
            session = await navi.create_session("secretary")
            await navi.run(session, "first")
            # Cut the log as a crash would: a run started, nothing after.
            ref = await navi.sessions.ref(session)
            await ref.stop("a test cuts the run")
            started = [UserMessage(text="second"), RunStarted(profile_id="secretary")]
            await navi.store.append(
                session,
                [NewEvent(event=e, run_id="cut-run") for e in started],
                expected_seq=await navi.store.last_seq(session),
            )
            assert await navi.sessions.start(session)
            records = await wait_for_events(navi.store, session, "run.completed", count=2)
            answers = [r.event.content for r in records if isinstance(r.event, RunCompleted)]
            assert answers == ["One.", "Two."]


async def test_a_run_leaves_the_moment_it_waits() -> None:
    waits = Waits()
    with waits.waiting():  # already waiting: at once
        with anyio.fail_after(5):
            await waits.until_waiting()
    left = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def leave() -> None:
            await waits.until_waiting()
            left.set()

        tg.start_soon(leave)
        await anyio.wait_all_tasks_blocked()
        with waits.waiting():  # woken by the mark, not by a poll
            with anyio.fail_after(5):
                await left.wait()
