"""Two Navi nodes (in one process, each with its own store, actors and cluster node) on
one PostgreSQL: requests for a session owned by the other node go through the inbox."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import asyncpg
import pytest

from events.envelope import NewEvent
from events.factory import store_for_url
from events.types import RunStarted, SessionCreated, UserMessage
from navi.app import Navi
from navi.cluster.node import ClusterNode
from navi.cluster.requests import ForwardedRefusal
from navi.session import messages as m
from navi.session.errors import BadInput, SessionNotFound
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import Reply
from tests.support.helpers import wait_for_events
from tests.support.navi_app import navi_settings, open_navi

pytestmark = pytest.mark.postgres


@asynccontextmanager
async def node(root: Path, url: str, fake: FakeLLM) -> AsyncIterator[Navi]:
    settings = navi_settings(root, fake.url, database_url=url, cluster_sweep_s=0.2)
    async with open_navi(settings, background=True, llm=fake) as navi:
        yield navi


@asynccontextmanager
async def two_nodes(root: Path, url: str, default: Reply) -> AsyncIterator[tuple[Navi, Navi]]:
    async with (
        FakeLLM(default=default) as fake,
        node(root / "a", url, fake) as a,
        node(root / "b", url, fake) as b,
    ):
        yield a, b


def cluster_of(navi: Navi) -> ClusterNode:
    placement = navi.sessions.placement
    assert isinstance(placement, ClusterNode)
    return placement


async def run_types(navi: Navi, session_id: str) -> list[str]:
    return [r.type for r in await navi.store.read(session_id)]


async def test_a_message_sent_to_the_other_node_runs_on_the_owner_and_is_watched_from_both(
    tmp_path: Path, cluster_db: str
) -> None:
    async with two_nodes(tmp_path, cluster_db, Reply(text="Hello there", delay=0.01)) as (a, b):
        session = await a.create_session()
        assert session in cluster_of(a).ownership.held
        reply = await b.send(session, "hi from b")
        assert not reply.queued
        # B follows the run that A's actor drives, live, from the log.
        with anyio.fail_after(15):
            end = await b.wait_for_end(session, reply)
        assert end.type == "run.completed" and end.run_id == reply.run_id
        assert session not in cluster_of(b).ownership.held
        records = await a.store.read(session)
        assert [r.run_id for r in records if r.type == "user.message"] == [reply.run_id]


async def test_refusals_and_answers_come_back_from_the_owner(
    tmp_path: Path, cluster_db: str
) -> None:
    async with two_nodes(tmp_path, cluster_db, Reply(text=["slow "] * 40, delay=0.05)) as (a, b):
        session = await a.create_session()
        with pytest.raises(BadInput):
            await b.send(session, "   ")
        with pytest.raises(SessionNotFound):
            await b.send("no-such-session", "hi")
        assert await b.sessions.ask(session, m.Pin(pinned=True)) is True
        assert await b.sessions.ask(session, m.Rename(title="named on b")) is None
        first = await a.send(session, "a long answer please")
        with pytest.raises(ForwardedRefusal) as refused:
            await b.send(session, "and another thing")
        assert refused.value.status == 409 and "already active" in refused.value.message
        queued = await b.send(session, "after that, this", queue=True)
        assert queued.queued
        assert await b.stop(session) is True
        with anyio.fail_after(15):
            end = await a.wait_for_end(session, first)
        assert end.type == "run.stopped"
        # The queued message runs once the stopped run has ended, with its row's id.
        with anyio.fail_after(15):
            end2 = await b.wait_for_end(session, queued)
        assert end2.run_id == queued.run_id and end2.type == "run.completed"
        assert await b.stop(session) is False  # nothing runs
        summary = await a.sessions.ask(session, m.Pin(pinned=None))  # toggles: was pinned
        assert summary is False


async def test_a_row_delivered_before_is_not_run_again(tmp_path: Path, cluster_db: str) -> None:
    """The owner died after the actor took a message but before the row was marked:
    the next delivery finds the run in the log and only marks the row."""
    async with two_nodes(tmp_path, cluster_db, Reply(text="ok")) as (a, b):
        session = await a.create_session()
        reply = await b.send(session, "once")
        with anyio.fail_after(15):
            await b.wait_for_end(session, reply)
        conn = await asyncpg.connect(cluster_db)
        try:
            await conn.execute(
                "UPDATE navi_inbox SET accepted_at = NULL, done_at = NULL, result = NULL"
            )
            cluster_of(a).delivery.wake()
            with anyio.fail_after(10):
                while await conn.fetchval("SELECT count(*) FROM navi_inbox WHERE done_at IS NULL"):
                    await anyio.sleep(0.02)
            result = await conn.fetchval("SELECT result::text FROM navi_inbox")
        finally:
            await conn.close()
        assert (await run_types(a, session)).count("run.started") == 1
        assert '"after_seq": 1' in result


async def test_a_run_nobody_drives_is_taken_over_and_resumed(
    tmp_path: Path, cluster_db: str
) -> None:
    """A session whose run is open in the log but whose owner is gone (no lock held)
    is claimed by a sweep (once two sweeps saw it free) and resumed."""
    async with (
        FakeLLM(default=Reply(text="resumed")) as fake,
        node(tmp_path / "b", cluster_db, fake) as b,
    ):
        # What a node that died mid-run leaves behind.
        async with store_for_url(cluster_db) as store:
            started = RunStarted(profile_id="secretary", backend="ollama", model="m")
            await store.append(
                "orphan",
                [
                    NewEvent(event=SessionCreated(profile_id="secretary")),
                    NewEvent(event=UserMessage(text="go on"), run_id="r1"),
                    NewEvent(event=started, run_id="r1"),
                ],
                expected_seq=0,
            )
        with anyio.fail_after(15):
            await wait_for_events(b.store, "orphan", "run.completed")
        assert "orphan" in cluster_of(b).ownership.held
        assert cluster_of(b).sweeper.takeovers == 1


async def test_an_idle_session_is_let_go_and_claimed_again_when_needed(
    tmp_path: Path, cluster_db: str
) -> None:
    async with FakeLLM(default=Reply(text="ok")) as fake:
        settings = navi_settings(
            tmp_path,
            fake.url,
            database_url=cluster_db,
            cluster_sweep_s=0.1,
            cluster_idle_release_s=0.3,
        )
        async with open_navi(settings, background=True, llm=fake) as a:
            session = await a.create_session()
            reply = await a.send(session, "hello")
            with anyio.fail_after(10):
                await a.wait_for_end(session, reply)
            with anyio.fail_after(10):
                while session in cluster_of(a).ownership.held:
                    await anyio.sleep(0.05)
            assert a.sessions.system.lookup(session) is None  # its actor stopped first
            again = await a.send(session, "still there?")
            assert session in cluster_of(a).ownership.held
            with anyio.fail_after(10):
                end = await a.wait_for_end(session, again)
            assert end.type == "run.completed"


async def test_an_approval_decided_on_the_other_node_reaches_the_owner(
    tmp_path: Path, cluster_db: str
) -> None:
    from events.types import ToolApprovalDecided, ToolApprovalRequested, ToolCompleted
    from navi.session.errors import ApprovalNotFound
    from tests.support.fake_llm import FakeToolCall

    write = FakeToolCall(
        name="filesystem", arguments={"action": "write", "path": "n.txt", "content": "x"}
    )
    async with FakeLLM() as fake:
        fake.script(Reply(tool_calls=[write]), Reply(text="Written."))
        settings = {
            "database_url": cluster_db,
            "cluster_sweep_s": 0.2,
            "tool_approval": "",
            "planning": "off",
        }
        async with (
            open_navi(
                navi_settings(tmp_path / "a", fake.url, **settings), background=True, llm=fake
            ) as a,
            open_navi(
                navi_settings(tmp_path / "b", fake.url, **settings), background=True, llm=fake
            ) as b,
        ):
            session = await a.create_session()
            await a.send(session, "write it")
            await wait_for_events(a.store, session, "tool.approval_requested")
            records = await a.store.read(session)
            request = next(r.event for r in records if isinstance(r.event, ToolApprovalRequested))
            with pytest.raises((ApprovalNotFound, ForwardedRefusal)) as refused:
                await b.decide(session, "no-such-call", approved=True, by="local")
            assert getattr(refused.value, "status", 404) == 404
            assert await b.decide(session, request.call_id, approved=True, by="local") == session
            assert session not in cluster_of(b).ownership.held
            await wait_for_events(a.store, session, "run.completed")
            records = await a.store.read(session)
            decided = [r.event for r in records if isinstance(r.event, ToolApprovalDecided)]
            assert [d.approved for d in decided] == [True]
            assert [r.event.call_id for r in records if isinstance(r.event, ToolCompleted)] == [
                request.call_id
            ]
