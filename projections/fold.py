"""The generic fold: a projection is an ``initial`` state and a pure ``evolve``.

``evolve(state, recorded) -> state`` never reads a clock, makes an id, does I/O or
changes ``state``: everything it needs is in the recorded event (its payload, seq and
timestamp). So folding a log from scratch gives exactly the state that applying the
same events one by one gave, and any projection can be computed as of any seq.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from events.envelope import Recorded

S = TypeVar("S")


@dataclass(frozen=True)
class Projection(Generic[S]):
    name: str
    initial: S
    evolve: Callable[[S, Recorded], S]


def fold(projection: Projection[S], records: Iterable[Recorded], state: S | None = None) -> S:
    """Apply ``records`` in order to ``state`` (the projection's initial state by default)."""
    evolve = projection.evolve
    current = projection.initial if state is None else state
    for record in records:
        current = evolve(current, record)
    return current


def fold_until(projection: Projection[S], records: Iterable[Recorded], seq: int) -> S:
    """The projection of one stream as of ``seq`` (events after it are not applied)."""
    evolve = projection.evolve
    current = projection.initial
    for record in records:
        if record.seq > seq:
            break
        current = evolve(current, record)
    return current


def fold_until_position(projection: Projection[S], records: Iterable[Recorded], position: int) -> S:
    """The projection of the global log (many streams) as of ``position``."""
    evolve = projection.evolve
    current = projection.initial
    for record in records:
        if record.position > position:
            break
        current = evolve(current, record)
    return current
