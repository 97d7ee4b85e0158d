"""The one contract both ``/v1`` ledgers keep (navi/server/openai/ledger.py): in one
node's memory, and in PostgreSQL shared by the nodes. Subclassed per ledger;
``open_nodes`` gives the ledgers of two nodes (the same one, for the memory's: one
node), and every case runs its second request on the second node."""

from __future__ import annotations

import uuid
from contextlib import AbstractAsyncContextManager

import anyio
import pytest

from navi.server.openai.errors import OpenAIError
from navi.server.openai.ledger import Ledger
from navi.session import messages as m

pytestmark = pytest.mark.anyio

KEEP_S = 600.0


class Starts:
    """A ``Start`` that counts its runs (each a new session and run); ``fail`` makes the
    next one raise, ``delay_s`` makes it slow."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.runs: list[str] = []
        self.delay_s = delay_s
        self.fail = False

    async def __call__(self) -> tuple[str, m.RunStartedReply]:
        await anyio.sleep(self.delay_s)
        if self.fail:
            self.fail = False
            raise RuntimeError("the session refused the message")
        number = len(self.runs)
        self.runs.append(f"run-{number}")
        return f"session-{number}", m.RunStartedReply(run_id=f"run-{number}", after_seq=number)


def user() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"  # the PostgreSQL table outlives a test


class LedgerContract:
    def open_nodes(self) -> AbstractAsyncContextManager[tuple[Ledger, Ledger]]:
        raise NotImplementedError

    async def test_an_equal_request_follows_the_same_run(self) -> None:
        starts, alice = Starts(), user()
        async with self.open_nodes() as (a, b):
            first, found = await a.start_or_follow(alice, "key:k1", "f1", KEEP_S, starts)
            assert found is False
            again, found = await b.start_or_follow(alice, "key:k1", "f1", KEEP_S, starts)
        assert found is True and starts.runs == ["run-0"]
        assert (again.session_id, again.reply) == (first.session_id, first.reply)

    async def test_the_same_key_for_another_request_is_refused(self) -> None:
        starts, alice = Starts(), user()
        async with self.open_nodes() as (a, b):
            await a.start_or_follow(alice, "key:k1", "f1", KEEP_S, starts)
            with pytest.raises(OpenAIError) as refused:
                await b.start_or_follow(alice, "key:k1", "f2", KEEP_S, starts)
        assert refused.value.status == 400
        assert refused.value.body()["error"]["code"] == "idempotency_key_reused"
        assert starts.runs == ["run-0"]  # nothing ran for it

    async def test_another_users_key_never_finds_the_run(self) -> None:
        starts, alice, mallory, eve = Starts(), user(), user(), user()
        async with self.open_nodes() as (a, b):
            first, _ = await a.start_or_follow(alice, "key:k1", "f1", KEEP_S, starts)
            theirs, found = await b.start_or_follow(mallory, "key:k1", "f1", KEEP_S, starts)
            # Nor is another body under alice's key refused: no hint that she used it.
            eves, eve_found = await b.start_or_follow(eve, "key:k1", "f9", KEEP_S, starts)
        assert found is False and eve_found is False
        assert theirs.session_id != first.session_id and theirs.reply.run_id == "run-1"
        assert eves.reply.run_id == "run-2" and starts.runs == ["run-0", "run-1", "run-2"]

    async def test_equal_requests_at_once_make_one_run(self) -> None:
        starts, alice = Starts(delay_s=0.3), user()
        got: list[tuple[str, bool]] = []
        async with self.open_nodes() as (a, b):

            async def ask(ledger: Ledger) -> None:
                entry, found = await ledger.start_or_follow(alice, "body:f1", "f1", 60, starts)
                got.append((entry.reply.run_id, found))

            async with anyio.create_task_group() as tg:
                for ledger in (a, b, a, b):
                    tg.start_soon(ask, ledger)
        assert starts.runs == ["run-0"]
        assert sorted(got) == [("run-0", False)] + [("run-0", True)] * 3

    async def test_a_start_that_fails_leaves_nothing(self) -> None:
        starts, alice = Starts(), user()
        starts.fail = True
        async with self.open_nodes() as (a, b):
            with pytest.raises(RuntimeError):
                await a.start_or_follow(alice, "key:k1", "f1", KEEP_S, starts)
            entry, found = await b.start_or_follow(alice, "key:k1", "f1", KEEP_S, starts)
        assert found is False and entry.reply.run_id == "run-0"

    async def test_a_forgotten_run_is_started_again(self) -> None:
        starts, alice = Starts(), user()
        async with self.open_nodes() as (a, b):
            first, _ = await a.start_or_follow(alice, "key:k1", "f1", KEEP_S, starts)
            await a.leave(first)
            await a.forget(first)
            again, found = await b.start_or_follow(alice, "key:k1", "f1", KEEP_S, starts)
        assert found is False and again.reply.run_id == "run-1"

    async def test_an_entry_expires_after_its_last_follower_left(self) -> None:
        starts, alice = Starts(), user()
        async with self.open_nodes() as (a, b):
            first, _ = await a.start_or_follow(alice, "body:f1", "f1", 0.3, starts)
            await anyio.sleep(0.5)
            # Still followed: kept whatever its time.
            kept, found = await b.start_or_follow(alice, "body:f1", "f1", 0.3, starts)
            assert found is True and kept.reply == first.reply
            await a.leave(first)
            await b.leave(kept)
            await anyio.sleep(0.6)
            later, found = await b.start_or_follow(alice, "body:f1", "f1", 0.3, starts)
        assert found is False and later.reply.run_id == "run-1"

    async def test_a_retry_on_any_node_counts_as_retried(self) -> None:
        starts, alice = Starts(), user()
        async with self.open_nodes() as (a, b):
            first, _ = await a.start_or_follow(alice, "key:k1", "f1", KEEP_S, starts)
            await a.leave(first)  # its client hung up
            assert await a.retried(first) is False
            await b.start_or_follow(alice, "key:k1", "f1", KEEP_S, starts)
            assert await a.retried(first) is True
