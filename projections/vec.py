"""``Vec``: an immutable, append-only sequence whose ``append`` is O(1) amortized.

Projections must be values (an old state never changes when a newer one is made),
yet a streaming run appends thousands of chunks and a long session thousands of
messages: copying a tuple per append would make a fold quadratic. A ``Vec`` is a
*view* of the first ``size`` items of a list that may be shared with newer ``Vec``s.
Appending to the newest view extends the shared list in place (older views do not
see the new item, since they only look at their first ``size`` items); appending to
an older view copies its prefix first, so branches never disturb each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class Vec(Generic[T]):
    __slots__ = ("_items", "_size")

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._items: list[T] = list(items)
        self._size = len(self._items)

    @classmethod
    def _view(cls, items: list[T], size: int) -> Vec[T]:
        vec: Vec[T] = cls.__new__(cls)
        vec._items = items
        vec._size = size
        return vec

    def append(self, item: T) -> Vec[T]:
        items = self._items
        if len(items) != self._size:
            # Someone appended to a newer view of the same list: branch off.
            items = items[: self._size]
        items.append(item)
        return Vec._view(items, self._size + 1)

    def extend(self, new: Iterable[T]) -> Vec[T]:
        items = self._items
        if len(items) != self._size:
            items = items[: self._size]
        items.extend(new)
        return Vec._view(items, len(items))

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def __iter__(self) -> Iterator[T]:
        return islice(self._items, self._size)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return self._items[: self._size][index]
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError(f"Vec index {index} out of range (size {self._size})")
        return self._items[index]

    def to_list(self) -> list[T]:
        return self._items[: self._size]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vec):
            return NotImplemented
        if self._size != other._size:
            return False
        if self._items is other._items:
            return True
        return all(a == b for a, b in zip(self, other, strict=True))

    __hash__: Any = None  # equality is by value, and values are not hashed

    def __repr__(self) -> str:
        return f"Vec({self.to_list()!r})"
