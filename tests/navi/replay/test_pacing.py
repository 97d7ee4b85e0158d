"""The replay clock: a pause between runs counts at most IDLE_GAP, also after the
post-turn compression that follows a run (its events carry the run's id)."""

from __future__ import annotations

from events.envelope import Recorded
from events.types import (
    ContextCompressed,
    ContextCompressing,
    RunCompleted,
    SessionPinned,
)
from navi.replay.pacing import IDLE_GAP, paced_gap

RUN = "run-1"
HOURS = 3 * 3600.0


def _at(seq: int, timestamp: float, event: object, run_id: str | None = RUN) -> Recorded:
    return Recorded(
        stream_id="s",
        seq=seq,
        position=seq,
        event_id=f"e{seq}",
        timestamp=timestamp,
        event=event,  # type: ignore[arg-type]
        run_id=run_id,
    )


def test_a_pin_hours_after_a_run_waits_only_the_idle_gap() -> None:
    ended = _at(1, 100.0, RunCompleted(content="ok"))
    pinned = _at(2, 100.0 + HOURS, SessionPinned(pinned=True), run_id=None)
    assert paced_gap(ended, pinned) == IDLE_GAP


def test_after_the_post_turn_compression_as_well() -> None:
    compressing = _at(2, 101.0, ContextCompressing(context_tokens=9000))
    compressed = _at(
        3,
        104.0,
        ContextCompressed(from_seq=1, to_seq=1, summary="s", messages_before=10, messages_after=2),
    )
    pinned = _at(4, 104.0 + HOURS, SessionPinned(pinned=True), run_id=None)
    assert paced_gap(compressing, compressed) == 3.0  # the compression itself keeps its time
    assert paced_gap(compressed, pinned) == IDLE_GAP
