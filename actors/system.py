"""``ActorSystem``: owns the task group every top-level actor runs in.

    async with ActorSystem() as system:
        ref = await system.spawn(Greeter(), name="greeter")
        await ref.ask(Hello("you"), timeout=5)

Leaving the block stops every actor gracefully (a priority ``Stop``: each finishes the
message in hand, stops its children, runs ``on_stop``). Actors still running after
``shutdown_timeout`` seconds are cancelled. If the block raises, actors are cancelled
at once and the exception propagates unchanged.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import structlog
from anyio.abc import TaskGroup

from actors.actor import Actor
from actors.cell import ActorCell, check_name
from actors.errors import ActorNameTaken, ActorSystemClosed, UnknownActor
from actors.ref import ActorRef
from actors.supervision import Supervision

log = structlog.get_logger(__name__)

M = TypeVar("M")


class ActorSystem:
    def __init__(
        self, *, shutdown_timeout: float = 10.0, supervision: Supervision | None = None
    ) -> None:
        self.shutdown_timeout = shutdown_timeout
        # The policy of top-level actors unless spawn() says otherwise.
        self.supervision = supervision or Supervision()
        self._tg: TaskGroup | None = None
        self._cells: dict[str, ActorCell] = {}
        self._top: dict[str, ActorCell] = {}

    async def __aenter__(self) -> Self:
        if self._tg is not None:
            raise RuntimeError("an ActorSystem can be entered only once")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        tg = self._tg
        if tg is None:
            return None
        self._tg = None  # spawn() refuses from now on
        if exc_type is None:
            with anyio.move_on_after(self.shutdown_timeout) as scope:
                await self._stop_all()
            if scope.cancelled_caught:
                log.warning(
                    "actors.shutdown_timeout",
                    timeout=self.shutdown_timeout,
                    still_running=sorted(self._cells),
                )
        tg.cancel_scope.cancel()
        try:
            return await tg.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # The block's own exception, alone: let it propagate as it was raised.
            if exc is not None and len(group.exceptions) == 1 and group.exceptions[0] is exc:
                return False
            raise

    async def _stop_all(self) -> None:
        tops = list(self._top.values())
        for cell in tops:
            cell.mailbox.request_stop("system shutdown")
        for cell in tops:
            await cell.terminated.wait()

    # ---------------------------------------------------------------- spawning

    async def spawn(
        self, actor: Actor[M], name: str, *, supervision: Supervision | None = None
    ) -> ActorRef[M]:
        """Start a top-level actor. Its messages queue until its ``on_start`` is done."""
        check_name(name)
        tg = self._tg
        if tg is None:
            raise ActorSystemClosed()
        if name in self._cells:
            raise ActorNameTaken(name)
        cell = ActorCell(
            self, actor, name, parent=None, supervision=supervision or self.supervision
        )
        self._register(cell)
        self._top[name] = cell
        await tg.start(cell.run, name=cell.path)
        return cell.ref

    # ---------------------------------------------------------------- lookup

    def lookup(self, path: str) -> ActorRef[Any] | None:
        """The running actor at ``path`` ("session-1", "session-1/subagent-2"), or None."""
        cell = self._cells.get(path)
        return None if cell is None else cell.ref

    def get(self, path: str) -> ActorRef[Any]:
        ref = self.lookup(path)
        if ref is None:
            raise UnknownActor(path)
        return ref

    @property
    def paths(self) -> list[str]:
        return sorted(self._cells)

    # ---------------------------------------------------------------- used by cells

    def _register(self, cell: ActorCell) -> None:
        if cell.path in self._cells:
            raise ActorNameTaken(cell.path)
        self._cells[cell.path] = cell

    def _unregister(self, cell: ActorCell) -> None:
        if self._cells.get(cell.path) is cell:
            del self._cells[cell.path]
        if cell.parent is None and self._top.get(cell.name) is cell:
            del self._top[cell.name]
