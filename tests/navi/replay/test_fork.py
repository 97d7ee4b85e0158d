from __future__ import annotations

import pytest

from events.store import EventStore
from events.types import (
    LLMText,
    ProfileSwitched,
    SessionCreated,
    UserMessage,
)
from navi.replay.errors import ReplayError, SeqOutOfRangeError, SessionExistsError
from navi.replay.fork import fork
from navi.run.state import RunState, state_at
from projections.context import CONTEXT
from projections.fold import fold, fold_until
from projections.invariants import log_problems
from projections.messages import MESSAGES
from projections.sessions import SESSIONS
from tests.navi.replay.support import make_session, tool_result, tool_turn, turn
from tests.support.well_formed import assert_well_formed

pytestmark = pytest.mark.anyio


async def test_a_fork_has_its_origins_history_then_goes_its_own_way(
    store: EventStore,
) -> None:
    await make_session(store, "o", turn("one"), turn("two"))
    origin = await store.read("o")
    result = await fork(store, "o", 9, "f", title="what if")
    assert (result.forked_from, result.forked_at_seq, result.head) == ("o", 9, 9)
    assert not result.closed_run and result.profile_id == "secretary"
    forked = await store.read("f")
    # A copy: its own session.created, then the origin's events 2..9 as stored there.
    assert forked[0].event == SessionCreated(
        profile_id="secretary",
        title="what if",
        forked_from="o",
        forked_at_seq=9,
        history_copied=True,
    )
    copy = [(r.seq, r.event, r.event_id, r.timestamp, r.run_id) for r in forked[1:]]
    assert copy == [(r.seq, r.event, r.event_id, r.timestamp, r.run_id) for r in origin[1:9]]
    assert fold(MESSAGES, forked) == fold_until(MESSAGES, origin, 9)

    # The fork goes on: its own events follow, numbered after the fork point.
    await store.append("f", [UserMessage(text="something else")], expected_seq=result.head)
    # The origin goes on too, and the fork does not see it.
    await store.append("o", [UserMessage(text="origin only")], expected_seq=len(origin))
    forked = await store.read("f")
    assert [r.seq for r in forked] == list(range(1, 11))
    messages = fold(MESSAGES, forked).messages()
    assert [(m.content, m.seq) for m in messages[-2:]] == [
        ("answer to one", 8),
        ("something else", 10),
    ]


async def test_the_session_list_shows_the_lineage(store: EventStore) -> None:
    await make_session(store, "o", turn("one"))
    await fork(store, "o", 2, "f", title="take two")
    sessions = fold(SESSIONS, await store.read_all())
    summary = sessions.get("f")
    assert summary is not None
    assert (summary.forked_from, summary.forked_at_seq, summary.title) == ("o", 2, "take two")


async def test_a_fork_inside_a_tool_step_stops_the_run_it_inherits(
    store: EventStore,
) -> None:
    head = await make_session(store, "o", turn("one"), tool_turn("search"), tool_result())
    result = await fork(store, "o", head - 1, "f")  # the call is running
    assert result.closed_run and result.head == head - 1 + 3
    forked = await store.read("f")
    assert [r.type for r in forked[head - 1 :]] == ["stop.requested", "tool.failed", "run.stopped"]
    assert state_at(forked) == RunState.STOPPED
    assert log_problems(forked) == []  # the copy holds the run it closes: checked whole
    context = fold(CONTEXT, forked)
    assert_well_formed(context)
    assert context.as_list()[-1].content.startswith("Stopped")


async def test_a_fork_inside_a_streamed_answer_keeps_the_partial_text(
    store: EventStore,
) -> None:
    await make_session(store, "o", turn("one", "a long answer", chunks=3))
    result = await fork(store, "o", 6, "f")  # after the second chunk
    assert result.closed_run
    forked = await store.read("f")
    assert state_at(forked) == RunState.STOPPED
    messages = fold(MESSAGES, forked).messages()
    assert messages[-1].role == "assistant" and messages[-1].content == "a l0 a l1 "
    assert isinstance(forked[5].event, LLMText)


async def test_the_fork_starts_with_the_profile_active_at_the_fork_point(
    store: EventStore,
) -> None:
    head = await make_session(store, "o", tool_turn("switch"))
    await store.append("o", [ProfileSwitched(profile_id="coder")], expected_seq=head)
    await store.append("o", tool_result(), expected_seq=head + 1)
    await fork(store, "o", head + 2, "f")
    created = (await store.read("f"))[0]
    assert created.event == SessionCreated(
        profile_id="coder", forked_from="o", forked_at_seq=head + 2, history_copied=True
    )


async def test_forks_of_forks(store: EventStore) -> None:
    await make_session(store, "o", turn("one"), turn("two"))
    await fork(store, "o", 9, "f1")
    await store.append("f1", [UserMessage(text="f1 says")], expected_seq=9)
    await fork(store, "f1", 10, "f2")
    await store.append("f2", [UserMessage(text="f2 says")], expected_seq=10)
    history = await store.read("f2")
    assert [r.seq for r in history] == list(range(1, 12))
    texts = [m.content for m in fold(MESSAGES, history).messages()]
    assert texts == ["one", "answer to one", "f1 says", "f2 says"]


async def test_bad_forks_are_refused_and_write_nothing(store: EventStore) -> None:
    head = await make_session(store, "o", turn("one"))
    with pytest.raises(SeqOutOfRangeError, match=r"events 1\.\.9; seq 10"):
        await fork(store, "o", head + 1, "f")
    with pytest.raises(SeqOutOfRangeError):
        await fork(store, "o", 0, "f")
    await make_session(store, "taken")
    with pytest.raises(SessionExistsError, match="'taken'"):
        await fork(store, "o", 2, "taken")
    await store.append(
        "child", [SessionCreated(profile_id="p", parent_stream_id="o")], expected_seq=0
    )
    with pytest.raises(ReplayError, match="subagent"):
        await fork(store, "child", 1, "f")
    # A fork left linked (its origin was gone when the upgrade ran) is not its history.
    broken = SessionCreated(profile_id="p", forked_from="gone", forked_at_seq=5)
    await store.append("linked", [broken], expected_seq=0)
    with pytest.raises(ReplayError, match="link to 'gone' is broken"):
        await fork(store, "linked", 1, "f")
    assert await store.last_seq("f") == 0
    assert await store.last_seq("taken") == 1
