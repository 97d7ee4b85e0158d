from __future__ import annotations

import pytest

from events.types import ToolCall
from projections.types import Message
from tests.support.well_formed import MalformedContext, assert_well_formed


def user(seq: int) -> Message:
    return Message(role="user", content="q", created_at="t", seq=seq)


def calls(seq: int, *ids: str) -> Message:
    tool_calls = tuple(ToolCall(id=i, name="t") for i in ids)
    return Message(role="assistant", content="", tool_calls=tool_calls, created_at="t", seq=seq)


def result(seq: int, call_id: str) -> Message:
    return Message(role="tool", content="r", tool_call_id=call_id, created_at="t", seq=seq)


def test_a_sound_context_passes() -> None:
    assert_well_formed([user(1), calls(2, "a", "b"), result(3, "b"), result(4, "a"), user(5)])
    assert_well_formed([])


@pytest.mark.parametrize(
    ("messages", "complaint"),
    [
        ([user(1), result(2, "a")], "no assistant message right before it"),
        ([calls(1, "a"), user(2), result(3, "a")], "comes before the results of calls ['a']"),
        ([calls(1, "a"), result(2, "a"), result(3, "a")], "result for call 'a'"),
        ([calls(1, "a", "a"), result(2, "a")], "repeats a tool call id"),
        ([calls(1, "a", "b"), result(2, "a")], "ends before the results of calls ['b']"),
        ([calls(1, "a"), calls(2, "b")], "comes before the results"),
    ],
)
def test_each_breach_is_named(messages: list[Message], complaint: str) -> None:
    with pytest.raises(MalformedContext, match=complaint.replace("[", r"\[").replace("]", r"\]")):
        assert_well_formed(messages)


def test_an_open_last_group_is_fine_mid_step() -> None:
    assert_well_formed([user(1), calls(2, "a", "b"), result(3, "a")], complete=False)
    with pytest.raises(MalformedContext):
        assert_well_formed([calls(2, "a"), user(3)], complete=False)
