"""Recovering a session's state from its history: a fork folds its origin's events up to
the fork point, and its writer appends at its own stream's seq while it speaks history
seqs."""

from __future__ import annotations

from events.in_memory import InMemoryEventStore
from events.types import LLMText, SessionPinned, UserMessage
from navi.replay.fork import fork
from navi.replay.history import read_history
from navi.session.recovery import recover
from navi.session.state import SessionState
from tests.navi.replay.support import make_session, turn


async def test_a_plain_session_recovers_from_its_stream() -> None:
    async with InMemoryEventStore() as store:
        head = await make_session(store, "s", turn("one"), turn("two"))
        state = SessionState()
        writer = await recover(store, "s", state, page=4)  # several pages
        async with writer.running():
            assert writer.offset == 0
            assert state.last_seq == head == writer.last_seq
            records = await writer.append(UserMessage(text="three"))
            assert [r.seq for r in records] == [head + 1]
        assert [m.content for m in state.context.as_list()] == ["one", "answer to one",
                                                               "two", "answer to two"]  # fmt: skip


async def test_a_fork_recovers_from_its_history_and_appends_at_its_own_seq() -> None:
    async with InMemoryEventStore() as store:
        # Pinned before the fork point: a pin is the origin's, not the fork's.
        await make_session(store, "origin", [SessionPinned(pinned=True)], turn("one"), turn("two"))
        at = 2 + len(turn("one"))
        await fork(store, "origin", at, "fork")
        state = SessionState()
        writer = await recover(store, "fork", state, page=3)
        assert writer.offset > 0
        assert state.last_seq == at == writer.last_seq
        assert [m.content for m in state.context.as_list()] == ["one", "answer to one"]
        assert state.created is not None and state.created.forked_from == "origin"
        assert state.pinned is False

        # Staged and appended events get history seqs; the stream stores its own.
        async with writer.running():
            assert await writer.stage(UserMessage(text="three")) == at + 1
            assert await writer.stage(LLMText(text="chunk")) == at + 2
            records = await writer.append(LLMText(text="more"))
            assert [r.seq for r in records] == [at + 3]
        stored = await store.read("fork")
        assert [r.seq for r in stored] == [1, 2, 3, 4]
        history = await read_history(store, "fork")
        assert [r.seq for r in history] == list(range(1, at + 4))
        assert history[at].event == UserMessage(text="three")
