"""Properties every projection keeps: pure, incremental = from scratch, as of any seq."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events.codec import decode, encode, version_of
from events.envelope import Recorded
from projections.context import CONTEXT
from projections.fold import Projection, fold, fold_until, fold_until_position
from projections.messages import MESSAGES
from projections.sessions import SESSIONS
from projections.tool_state import ACTIVE_PROFILE, SCRATCHPAD, TODO
from tests.projections.logs import recorded_logs

STREAM_PROJECTIONS: list[Projection[Any]] = [MESSAGES, CONTEXT, TODO, SCRATCHPAD, ACTIVE_PROFILE]
ALL = [*STREAM_PROJECTIONS, SESSIONS]


def snapshot(projection: Projection[Any], state: Any) -> bytes:
    """What a client would be sent: the encoded view of a state."""
    if projection is MESSAGES:
        return msgspec.json.encode(state.messages())
    if projection is CONTEXT:
        return msgspec.json.encode([state.as_list(), state.token_count])
    if projection is SESSIONS:
        return msgspec.json.encode(state.listing())
    return msgspec.json.encode(state)


@pytest.mark.parametrize("projection", ALL, ids=lambda p: p.name)
@settings(max_examples=60, deadline=None)
@given(log=recorded_logs(), data=st.data())
def test_incremental_equals_from_scratch(
    projection: Projection[Any], log: list[Recorded], data: st.DataObject
) -> None:
    # Every intermediate state, applying events one by one...
    states = [projection.initial]
    for record in log:
        states.append(projection.evolve(states[-1], record))
    # ...is what a fold from scratch as of that seq gives, even after later evolution
    # (an old state never changes when newer ones are made from it).
    for seq in sorted(data.draw(st.sets(st.integers(0, len(log)), max_size=6))):
        scratch = fold_until(projection, log, seq)
        assert states[seq] == scratch
        assert snapshot(projection, states[seq]) == snapshot(projection, scratch)
        assert fold_until_position(projection, log, seq) == scratch
    # Resuming a fold from any state gives the same end.
    cut = data.draw(st.integers(0, len(log)))
    resumed = fold(projection, log[cut:], fold_until(projection, log, cut))
    assert resumed == states[-1] == fold(projection, log)
    assert snapshot(projection, resumed) == snapshot(projection, states[-1])


@pytest.mark.parametrize("projection", ALL, ids=lambda p: p.name)
@settings(max_examples=20, deadline=None)
@given(log=recorded_logs())
def test_replay_is_byte_for_byte(projection: Projection[Any], log: list[Recorded]) -> None:
    # Through the codec, as a store gives the events back.
    decoded = [
        msgspec.structs.replace(r, event=decode(r.type, version_of(r.type), encode(r.event)))
        for r in log
    ]
    assert snapshot(projection, fold(projection, decoded)) == snapshot(
        projection, fold(projection, log)
    )
