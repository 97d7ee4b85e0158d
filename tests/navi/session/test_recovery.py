"""Recovering a session's state from its stream: a fork's holds a copy of its origin's
events up to the fork point, so it recovers and appends as any session does."""

from __future__ import annotations

from events.in_memory import InMemoryEventStore
from events.types import LLMText, SessionPinned, UserMessage
from navi.replay.fork import fork
from navi.session.recovery import recover
from navi.session.state import SessionState
from tests.navi.replay.support import make_session, turn


async def test_a_plain_session_recovers_from_its_stream() -> None:
    async with InMemoryEventStore() as store:
        head = await make_session(store, "s", turn("one"), turn("two"))
        state = SessionState()
        writer = await recover(store, "s", state, page=4)  # several pages
        async with writer.running():
            assert state.last_seq == head == writer.last_seq
            records = await writer.append(UserMessage(text="three"))
            assert [r.seq for r in records] == [head + 1]
        assert [m.content for m in state.context.as_list()] == ["one", "answer to one",
                                                               "two", "answer to two"]  # fmt: skip


async def test_a_fork_recovers_from_its_copy_and_appends_after_it() -> None:
    async with InMemoryEventStore() as store:
        # Pinned before the fork point: a pin is the origin's, not the fork's.
        await make_session(store, "origin", [SessionPinned(pinned=True)], turn("one"), turn("two"))
        at = 2 + len(turn("one"))
        await fork(store, "origin", at, "fork")
        state = SessionState()
        writer = await recover(store, "fork", state, page=3)
        assert state.last_seq == at == writer.last_seq
        assert [m.content for m in state.context.as_list()] == ["one", "answer to one"]
        assert state.created is not None and state.created.forked_from == "origin"
        assert state.pinned is False

        # Staged and appended events get the seqs the stream stores them at.
        async with writer.running():
            assert await writer.stage(UserMessage(text="three")) == at + 1
            assert await writer.stage(LLMText(text="chunk")) == at + 2
            records = await writer.append(LLMText(text="more"))
            assert [r.seq for r in records] == [at + 3]
        stored = await store.read("fork")
        assert [r.seq for r in stored] == list(range(1, at + 4))
        assert stored[at].event == UserMessage(text="three")
