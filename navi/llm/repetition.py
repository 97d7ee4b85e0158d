"""Noticing a generation that loops: its text ends with the same stretch, again and again.

A small model (the embedded SmolLM2-135M) falls into loops — "Say hi" once ran four
minutes and 23,000 characters of the same lines. The embedded backend feeds every
piece it generates to a :class:`RepetitionGuard` and ends the answer when the guard
trips. Pure: text in, a yes or no out.

The test: the text ends with a stretch of ``period`` characters repeated back to back
(a string ``s`` repeats with period ``p`` exactly when ``s[p:] == s[:-p]``), over at
least ``min_repeats`` periods and ``min_span`` characters, for any period up to
``max_period``. A repeated line, sentence or paragraph, or a word stuttered many times,
all are such a tail; ordinary prose, lists and code are not (their lines differ).
"""

from __future__ import annotations

__all__ = ["RepetitionGuard"]

KEY_LEN = 8


class RepetitionGuard:
    def __init__(self, *, min_repeats: int = 3, min_span: int = 160, max_period: int = 400) -> None:
        self.min_repeats = min_repeats
        self.min_span = min_span
        self.max_period = max_period
        # Only the end of the text matters: enough for the longest period's repeats.
        self._keep = max(min_span, min_repeats * max_period)
        self._tail = ""
        self.tripped = False
        self.period = 0  # the period found, once tripped

    def feed(self, piece: str) -> bool:
        """Add a generated piece; True once the text ends in a loop."""
        if self.tripped:
            return True
        self._tail = (self._tail + piece)[-self._keep :]
        tail = self._tail
        size = len(tail)
        # A tail that repeats with period p has its last few characters again p earlier:
        # only those distances are tested (in prose, almost none).
        key_len = min(KEY_LEN, size - 1)
        if key_len <= 0:
            return False
        key = tail[-key_len:]
        start = size - key_len
        low = max(0, start - self.max_period)
        high = size - 1
        while (found := tail.rfind(key, low, high)) >= 0:
            high = found + key_len - 1
            period = start - found
            if self.min_repeats * period > size:
                break  # every longer period needs even more text
            span = max(self.min_repeats * period, self.min_span)
            if span > size:
                continue
            end = tail[-span:]
            if end[period:] == end[:-period]:
                self.tripped = True
                self.period = period
                return True
        return False
