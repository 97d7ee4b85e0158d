"""The replay clock's pace: how long to wait between two recorded events, and the
speed factor a replay runs at.

The replay clock is the recorded time with the idle stretches cut short: inside a run,
events are as far apart as they were; between runs (after a run ended, or between
session-level events) a gap counts at most ``IDLE_GAP`` seconds, so replaying a session
that was left for a night does not wait a night. The replay socket, the timeline and
``navi replay`` all pace by this one clock.
"""

from __future__ import annotations

from events.envelope import Recorded
from events.types import TERMINAL_RUN_EVENTS

IDLE_GAP = 0.5  # seconds: the longest a pause between runs lasts on the replay clock
MAX_SPEED = 1000.0  # beyond this a replay is as fast as "max": no point in a number


class BadReplayRequest(ValueError):
    """A replay asked for something it cannot be given (a speed, a seq)."""


# The end of a compression: after ``run.completed`` the post-turn compression writes its
# events under the run's id, so without these the pause after it (until a pin or the next
# message, hours later) would count in full and squeeze the whole run into a sliver of
# the timeline. Inside a run the next LLM call follows a compression at once: no change.
_COMPRESSION_ENDS = frozenset({"context.compressed", "context.compression_failed"})


def _rests_after(record: Recorded) -> bool:
    """Nothing was running after this event: the time until the next is idle time."""
    return (
        record.run_id is None
        or record.type in TERMINAL_RUN_EVENTS
        or record.type in _COMPRESSION_ENDS
    )


def paced_gap(previous: Recorded | None, record: Recorded) -> float:
    """Seconds between two events on the replay clock."""
    if previous is None:
        return 0.0
    gap = max(0.0, record.timestamp - previous.timestamp)
    return min(gap, IDLE_GAP) if _rests_after(previous) else gap


def parse_speed(raw: object) -> float | None:
    """A speed factor, or ``None`` for ``max``; raises ``BadReplayRequest``."""
    if isinstance(raw, str):
        if raw.strip().lower() == "max":
            return None
        try:
            raw = float(raw)
        except ValueError:
            raise BadReplayRequest(f"speed must be a number or 'max', not {raw!r}") from None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise BadReplayRequest(f"speed must be a number or 'max', not {raw!r}")
    if not 0 < raw <= MAX_SPEED:
        raise BadReplayRequest(f"speed must be above 0 and at most {MAX_SPEED:g}, not {raw}")
    return float(raw)
