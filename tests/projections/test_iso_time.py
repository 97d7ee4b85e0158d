"""iso_time is datetime's own ISO rendering, character for character."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import example, given
from hypothesis import strategies as st

from projections.types import iso_time


def reference(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds")


@given(st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False))
@example(1_700_000_000.9999995)  # rounds up into the next second
@example(1_700_000_000.0000005)
@example(1_700_000_000.0015)
@example(0.0)
@example(1_764_131_956.999)
def test_iso_time_is_datetimes_rendering(timestamp: float) -> None:
    assert iso_time(timestamp) == reference(timestamp)


def test_consecutive_timestamps_across_a_second_boundary() -> None:
    base = 1_764_131_956.0
    for step in range(-3000, 3000):
        timestamp = base + step * 0.000_333
        assert iso_time(timestamp) == reference(timestamp)
