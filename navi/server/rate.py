"""A bound on how often one user may do something costly (imports: seconds of parsing
and checking each), over a sliding hour, kept in the server's memory.

Every attempt counts, a refused file too: checking a bad 60 MB file costs what
importing a good one does. A restart forgets the counts (a user cannot restart the
server); so does each node of a cluster keep its own.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

HOUR_S = 3600.0


class HourlyLimit:
    """At most ``per_hour`` attempts per key in any hour (0: no limit)."""

    def __init__(self, per_hour: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_hour = per_hour
        self.clock = clock
        self._times: dict[str, deque[float]] = {}

    def take(self, key: str) -> int | None:
        """Count one attempt of ``key`` and return None; or, when it already made
        ``per_hour`` in the last hour, count nothing and return the seconds until it may
        try again."""
        if not self.per_hour:
            return None
        now = self.clock()
        times = self._times.setdefault(key, deque())
        while times and now - times[0] >= HOUR_S:
            times.popleft()
        if len(times) >= self.per_hour:
            return max(1, math.ceil(HOUR_S - (now - times[0])))
        times.append(now)
        return None
