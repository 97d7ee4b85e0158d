"""An LLM server away for longer than the retries leaves the run open, waiting for it
(``llm.waiting``, state ``waiting_for_llm``); it goes on when the server answers again,
on Try again, or after a restart, and a stop still stops it. The server is the real HTTP
fake, stopped and started again on the same port."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from events.types import LLMWaiting, RunCompleted
from navi.app import Navi
from navi.run.state import RunState, state_at
from navi.session.errors import NotWaitingForLLM
from tests.support.fake_llm import FakeLLMServer, FakeToolCall, Reply
from tests.support.helpers import free_port, wait_for_events
from tests.support.navi_app import navi_settings, open_navi

pytestmark = pytest.mark.anyio

READ = FakeToolCall(name="todo", arguments={"action": "read"})


@asynccontextmanager
async def away_after_a_tool(
    tmp_path: Path, port: int, **settings: Any
) -> AsyncIterator[tuple[Navi, str]]:
    """Navi with a run that called a tool, then lost its server mid-answer for good:
    it is left waiting for the server (``llm.waiting`` is in the log)."""
    config = navi_settings(tmp_path, f"http://127.0.0.1:{port}", planning="off", **settings)
    async with open_navi(config) as navi:
        session = await navi.create_session("secretary")
        async with FakeLLMServer(port=port) as fake:
            # The second answer never comes: the server goes away while it is asked.
            fake.script(Reply(tool_calls=[READ]), Reply(text="late", delay_first=60))
            await navi.send(session, "Read the todo list.", mode="run")
            with anyio.fail_after(10):
                await fake.wait_for_requests(2)
        await wait_for_events(navi.store, session, "llm.waiting")
        yield navi, session


async def run_state(navi: Navi, session: str) -> RunState:
    return state_at(await navi.store.read(session))


async def test_the_run_waits_for_its_server_and_goes_on_by_itself(tmp_path: Path) -> None:
    port = free_port()
    async with away_after_a_tool(tmp_path, port, llm_retries=1, llm_retry_backoff_s=0.02) as (
        navi,
        session,
    ):
        records = await navi.store.read(session)
        assert records[-1].type == "llm.waiting" and "run.failed" not in [r.type for r in records]
        assert await run_state(navi, session) is RunState.WAITING_FOR_LLM
        async with FakeLLMServer(port=port) as fake:
            fake.script(Reply(text="Done."))
            records = await wait_for_events(navi.store, session, "run.completed")
            assert fake.pending == 0
    types = [r.type for r in records]
    assert isinstance(records[-1].event, RunCompleted) and records[-1].event.content == "Done."
    # The tool ran once; the lost answer was asked again, not the whole turn.
    assert types.count("tool.started") == 1 and types.count("llm.waiting") == 1
    assert types.count("run.started") == 1


async def test_try_again_goes_on_at_once(tmp_path: Path) -> None:
    port = free_port()
    # No retry, and the first probe a long way off: only Try again goes on now.
    async with away_after_a_tool(tmp_path, port, llm_retries=0, llm_retry_backoff_s=60.0) as (
        navi,
        session,
    ):
        (waiting,) = [
            r.event for r in await navi.store.read(session) if isinstance(r.event, LLMWaiting)
        ]
        assert "127.0.0.1" in waiting.error
        async with FakeLLMServer(port=port) as fake:
            fake.script(Reply(text="Done."))
            assert await navi.try_again(session) is True
            records = await wait_for_events(navi.store, session, "run.completed")
        assert [r.type for r in records].count("tool.started") == 1
        with pytest.raises(NotWaitingForLLM):
            await navi.try_again(session)  # the run is over: nothing waits


async def test_a_stop_while_waiting_stops_the_run(tmp_path: Path) -> None:
    port = free_port()
    async with away_after_a_tool(tmp_path, port, llm_retries=0, llm_retry_backoff_s=60.0) as (
        navi,
        session,
    ):
        assert await navi.stop(session)
        records = await wait_for_events(navi.store, session, "run.stopped")
        assert [r.type for r in records][-2:] == ["stop.requested", "run.stopped"]


async def test_a_restart_while_waiting_goes_on_with_the_run(tmp_path: Path) -> None:
    port = free_port()
    knobs: dict[str, Any] = {"llm_retries": 0, "llm_retry_backoff_s": 60.0}
    async with away_after_a_tool(tmp_path, port, **knobs) as (navi, session):
        pass
    # Navi restarts while the server is back: its recovery continues the run, probing at
    # once (not after the minute-long back-off).
    config = navi_settings(tmp_path, f"http://127.0.0.1:{port}", planning="off", **knobs)
    async with FakeLLMServer(port=port) as fake:
        fake.script(Reply(text="Done."))
        async with open_navi(config) as navi:
            assert await navi.sessions.start(session)
            records = await wait_for_events(navi.store, session, "run.completed")
    types = [r.type for r in records]
    assert types.count("tool.started") == 1 and types.count("run.started") == 1


async def test_a_server_that_refuses_the_model_still_fails_the_run(tmp_path: Path) -> None:
    async with FakeLLMServer() as fake:
        fake.script(Reply(error_before="bad request", error_status=400))
        config = navi_settings(tmp_path, fake.url, planning="off", llm_retries=1)
        async with open_navi(config) as navi:
            session = await navi.create_session("secretary")
            await navi.send(session, "hello", mode="run")
            records = await wait_for_events(navi.store, session, "run.failed")
    assert "llm.waiting" not in [r.type for r in records]


async def slot_given_back(navi: Navi) -> None:
    """Until the waiting run has given its slot back (just after its llm.waiting)."""
    with anyio.fail_after(10):
        while navi.live_runs.load()["live_runs"]:
            await anyio.sleep(0.01)


async def test_a_run_waiting_for_its_server_lends_its_slot_and_queues_to_go_on(
    tmp_path: Path,
) -> None:
    """NAVI_MAX_LIVE_RUNS=1: the run that waits holds no slot, so another session's
    run streams; Try again puts it in line behind that run (as a new run would be), and
    it goes on once the slot is free. Nothing is lost, nothing runs twice."""
    port = free_port()
    knobs: dict[str, Any] = {"llm_retries": 0, "llm_retry_backoff_s": 60.0, "max_live_runs": 1}
    async with away_after_a_tool(tmp_path, port, **knobs) as (navi, first):
        await slot_given_back(navi)
        async with FakeLLMServer(port=port) as fake:
            fake.script(Reply(text="Second.", delay_first=1.5), Reply(text="First."))
            second = await navi.create_session("secretary")
            await navi.send(second, "Say something.", mode="run")
            with anyio.fail_after(10):
                await fake.wait_for_requests(1)  # it streams: not in line behind the first
            assert navi.live_runs.load()["live_runs"] == 1
            assert await navi.try_again(first) is True
            with anyio.fail_after(10):
                while navi.live_runs.ahead(first) != 0:
                    await anyio.sleep(0.01)
            assert len(fake.requests) == 1  # the first waits in line, asks nothing yet
            assert await run_state(navi, first) is RunState.WAITING_FOR_LLM
            second_records = await wait_for_events(navi.store, second, "run.completed")
            first_records = await wait_for_events(navi.store, first, "run.completed")
            asked = [r["messages"][-1]["content"] for r in fake.requests]
        assert navi.live_runs.load() == {"live_runs": 0, "queued": 0, "max_live_runs": 1}
    assert asked[0] == "Say something." and len(asked) == 2  # the first went on after
    first_types = [r.type for r in first_records]
    assert isinstance(first_records[-1].event, RunCompleted)
    assert first_records[-1].event.content == "First."
    for kind in ("run.started", "tool.started", "llm.waiting", "run.completed"):
        assert first_types.count(kind) == 1, kind
    second_types = [r.type for r in second_records]
    assert second_types.count("llm.requested") == 1 and second_types.count("run.completed") == 1


async def test_a_run_stopped_in_line_after_its_wait_ends_stopped(tmp_path: Path) -> None:
    """Back from its wait but in line for a slot: a stop ends it without an LLM call,
    and the slot it never took is not given back (the count stays right)."""
    port = free_port()
    knobs: dict[str, Any] = {"llm_retries": 0, "llm_retry_backoff_s": 60.0, "max_live_runs": 1}
    async with away_after_a_tool(tmp_path, port, **knobs) as (navi, first):
        await slot_given_back(navi)
        async with FakeLLMServer(port=port) as fake:
            fake.script(Reply(text="Second.", delay_first=1.5))
            second = await navi.create_session("secretary")
            await navi.send(second, "Say something.", mode="run")
            with anyio.fail_after(10):
                await fake.wait_for_requests(1)
            assert await navi.try_again(first) is True
            with anyio.fail_after(10):
                while navi.live_runs.ahead(first) != 0:
                    await anyio.sleep(0.01)
            assert await navi.stop(first)
            records = await wait_for_events(navi.store, first, "run.stopped")
            assert navi.live_runs.load() == {"live_runs": 1, "queued": 0, "max_live_runs": 1}
            await wait_for_events(navi.store, second, "run.completed")
            assert len(fake.requests) == 1
        assert navi.live_runs.load() == {"live_runs": 0, "queued": 0, "max_live_runs": 1}
    assert [r.type for r in records][-2:] == ["stop.requested", "run.stopped"]


SPAWN = FakeToolCall(name="spawn_agent", arguments={"task": "Read the todo list."})


async def test_try_again_in_the_parent_goes_on_with_its_waiting_subagent(tmp_path: Path) -> None:
    """A subagent's run waits for the model's server (its own log says
    ``llm.waiting``): Try again asked of the top-level session goes on with it, and the
    turn ends once, with the subagent's answer."""
    port = free_port()
    knobs: dict[str, Any] = {"llm_retries": 0, "llm_retry_backoff_s": 60.0}
    config = navi_settings(tmp_path, f"http://127.0.0.1:{port}", planning="off", **knobs)
    async with open_navi(config) as navi:
        parent = await navi.create_session("secretary")
        async with FakeLLMServer(port=port) as fake:
            fake.script(Reply(tool_calls=[SPAWN]), Reply(text="late", delay_first=60))
            await navi.send(parent, "Delegate it.", mode="run")
            with anyio.fail_after(10):
                await fake.wait_for_requests(2)
        records = await wait_for_events(navi.store, parent, "subagent.spawned")
        child = next(r.event.child_stream_id for r in records if r.type == "subagent.spawned")
        await wait_for_events(navi.store, child, "llm.waiting")
        assert await run_state(navi, child) is RunState.WAITING_FOR_LLM
        async with FakeLLMServer(port=port) as fake:
            fake.script(Reply(text="The list is empty."), Reply(text="It is empty."))
            assert await navi.try_again(parent) is True
            records = await wait_for_events(navi.store, parent, "run.completed")
        child_types = [r.type for r in await navi.store.read(child)]
        with pytest.raises(NotWaitingForLLM):
            await navi.try_again(parent)  # nothing of its tree waits now
    assert (
        isinstance(records[-1].event, RunCompleted) and records[-1].event.content == "It is empty."
    )
    assert [r.type for r in records].count("subagent.spawned") == 1
    assert child_types.count("run.started") == 1 and child_types.count("run.completed") == 1
    assert child_types.count("llm.waiting") == 1
