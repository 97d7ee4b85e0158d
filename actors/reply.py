"""A one-shot reply slot: what ``ask`` waits on."""

from __future__ import annotations

from typing import Any

import anyio

_UNSET: Any = object()


class Reply:
    """Completed once, with a value or an exception; later completions are ignored
    (an asker that timed out has gone, and a late reply must not raise in the actor)."""

    __slots__ = ("_done", "_error", "_value")

    def __init__(self) -> None:
        self._done = anyio.Event()
        self._value: Any = _UNSET
        self._error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def set(self, value: Any) -> None:
        if not self.done:
            self._value = value
            self._done.set()

    def fail(self, error: BaseException) -> None:
        if not self.done:
            self._error = error
            self._done.set()

    async def wait(self) -> Any:
        await self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value
