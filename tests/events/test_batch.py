from __future__ import annotations

import threading
import uuid

from events.batch import EventIds


def test_event_ids_are_uuids_unique_across_threads() -> None:
    """SQLite may plan a batch in a worker thread while the loop plans another: ids
    handed out at the same time in several threads are still all different."""
    ids = EventIds()
    got: list[list[str]] = [[] for _ in range(4)]

    def take(into: list[str]) -> None:
        for _ in range(2000):
            into.extend(ids.many(3))
            into.append(ids())

    threads = [threading.Thread(target=take, args=(into,)) for into in got]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [i for into in got for i in into]
    assert len(set(every)) == len(every) == 4 * 2000 * 4
    assert all(str(uuid.UUID(i)) == i for i in every[:100])
