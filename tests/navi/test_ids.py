"""Session and run ids are UUIDs of version 7: random, and in the order they were made."""

from __future__ import annotations

import time
import uuid

from navi.ids import new_id


def test_an_id_is_a_version_7_uuid_holding_the_time_it_was_made() -> None:
    before = time.time_ns() // 1_000_000
    made = new_id()
    after = time.time_ns() // 1_000_000
    parsed = uuid.UUID(made)
    assert str(parsed) == made and parsed.version == 7 and parsed.variant == uuid.RFC_4122
    assert before <= parsed.int >> 80 <= after


def test_ids_are_unique_and_later_ones_sort_later() -> None:
    ids = [new_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    first = new_id()
    time.sleep(0.002)
    assert new_id() > first  # as strings too: the log's index keeps them in that order
    # 74 random bits: ids of one millisecond differ beyond the time.
    same_ms = [i for i in ids if i[:13] == ids[0][:13]]
    assert len({i[14:] for i in same_ms}) == len(same_ms)
