from __future__ import annotations

import msgspec
import pytest

from events.store import EventStore
from events.types import (
    ProfileSwitched,
    ScratchpadUpdated,
    TodoItem,
    TodoUpdated,
    UserMessage,
)
from navi.replay.errors import SeqOutOfRangeError
from navi.replay.fork import fork
from navi.replay.inspect import llm_request, state_at
from navi.replay.snapshots import catch_up_snapshots
from navi.run.state import RunState
from projections.context import CONTEXT
from projections.fold import fold_until
from projections.messages import MESSAGES
from tests.navi.replay.support import make_session, tool_result, tool_turn, turn

pytestmark = pytest.mark.anyio


async def tools_session(store: EventStore) -> int:
    """turn one (2..9), a tool turn (10..15) with todo, scratchpad, profile (16..18), the
    result (19), then a second LLM call (20) and its answer."""
    head = await make_session(store, "s", turn("one"), tool_turn("search"))
    more = [
        TodoUpdated(items=(TodoItem(id=1, text="search", status="done"),)),
        ScratchpadUpdated(section="notes", content="found it"),
        ProfileSwitched(profile_id="coder", profile_name="Coder"),
        *tool_result(),
        *turn("ignored")[2:],  # llm.requested, chunks, llm.completed, run.completed
    ]
    await store.append("s", more, expected_seq=head)
    return head + len(more)


async def test_the_state_right_after_an_event(store: EventStore) -> None:
    head = await tools_session(store)
    log = await store.read("s")
    at = await state_at(store, "s", 18)
    assert (at.seq, at.head, at.event_type) == (18, head, "profile.switched")
    assert at.run_state == RunState.EXECUTING_TOOLS and at.run_state_error is None
    assert at.messages == fold_until(MESSAGES, log, 18).messages()
    assert at.context == fold_until(CONTEXT, log, 18).as_list()
    assert at.todo == [TodoItem(id=1, text="search", status="done")]
    assert at.scratchpad == {"notes": "found it"}
    assert (at.active_profile.profile_id, at.active_profile.profile_name) == ("coder", "Coder")
    # Encodable as the REST answer.
    body = msgspec.json.decode(msgspec.json.encode(at))
    assert body["run_state"] == "executing_tools" and body["todo"][0]["text"] == "search"

    before = await state_at(store, "s", 0)
    assert before.event_type is None and before.messages == [] and before.todo == []
    end = await state_at(store, "s", head)
    assert end.run_state == RunState.DONE


async def test_llm_requests_are_reconstructed(store: EventStore) -> None:
    await tools_session(store)
    log = await store.read("s")
    at = await state_at(store, "s", 21)
    assert [r.seq for r in at.llm_requests] == [4, 12, 20]
    first, loop_call, next_call = at.llm_requests
    # Calls of earlier runs are listed without their messages...
    assert first.messages is None and first.run is not None and first.run.seq == 3
    assert (first.run.profile_hash, first.model, first.tools) == ("h1", "m", ("web_search",))
    assert first.options == {"temperature": 0.2}
    # ...those of the run at the seq with them: the context just before the call.
    assert loop_call.messages == fold_until(CONTEXT, log, 11).as_list()
    assert next_call.messages == fold_until(CONTEXT, log, 19).as_list()
    assert next_call.messages[-1].role == "tool"
    # Any call, on demand.
    request = await llm_request(store, "s", 4)
    assert request.messages == fold_until(CONTEXT, log, 3).as_list()
    assert [m.content for m in request.messages] == ["one"]
    with pytest.raises(ValueError, match=r"seq 5 is a llm\.text"):
        await llm_request(store, "s", 5)


async def test_snapshots_give_the_same_answers(store: EventStore) -> None:
    head = await tools_session(store)
    plain = [await state_at(store, "s", seq) for seq in range(head + 1)]
    await catch_up_snapshots(store, "s", every=4)
    with_snapshots = [await state_at(store, "s", seq, every=4) for seq in range(head + 1)]
    assert with_snapshots == plain


async def test_a_seq_out_of_range_is_refused(store: EventStore) -> None:
    head = await make_session(store, "s", turn("one"))
    with pytest.raises(SeqOutOfRangeError, match=f"seq {head + 1}"):
        await state_at(store, "s", head + 1)
    with pytest.raises(SeqOutOfRangeError):
        await state_at(store, "s", -1)
    with pytest.raises(SeqOutOfRangeError):
        await llm_request(store, "s", 0)


async def test_an_event_the_state_machine_refuses_is_reported(store: EventStore) -> None:
    head = await make_session(store, "s", turn("one"))
    await store.append("s", [*tool_result(), UserMessage(text="two")], expected_seq=head)
    at = await state_at(store, "s", head + 2)
    assert at.run_state_error is not None and f"seq {head + 1}" in at.run_state_error
    assert at.messages[-1].content == "two"  # the rest of the state is still there


async def test_inspecting_a_fork(store: EventStore) -> None:
    await make_session(store, "o", turn("one"), turn("two"))
    await fork(store, "o", 9, "f")
    await store.append("f", turn("three"), expected_seq=9)
    at = await state_at(store, "f", 12)
    assert [m.content for m in at.messages] == ["one", "answer to one", "three"]
    assert [r.seq for r in at.llm_requests] == [4, 12]
    assert at.llm_requests[1].messages is not None
    assert [m.content for m in at.llm_requests[1].messages] == ["one", "answer to one", "three"]
