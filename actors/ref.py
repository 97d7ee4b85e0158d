"""``ActorRef``: the only way to talk to an actor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio

from actors.errors import ActorStopped, AskTimeout
from actors.messages import Stop
from actors.reply import Reply

if TYPE_CHECKING:
    from actors.cell import ActorCell

M = TypeVar("M")


@dataclass(frozen=True, slots=True)
class Ask:
    """A message with a reply slot; ``receive`` sees only ``message``."""

    message: object
    reply: Reply


class ActorRef(Generic[M]):
    """A handle on a running actor: send it messages, ask it questions, stop it.

    Don't ``ask`` yourself or ``await stop()`` yourself from inside your own
    ``receive``: the answer would come after the message you are handling, i.e. never.
    Inside an actor, use ``tell_nowait`` to message yourself and ``Actor.stop()`` to stop.
    """

    __slots__ = ("_cell",)

    def __init__(self, cell: ActorCell) -> None:
        self._cell = cell

    @property
    def path(self) -> str:
        return self._cell.path

    @property
    def name(self) -> str:
        return self._cell.name

    @property
    def is_stopped(self) -> bool:
        """True once the actor takes no more messages (it may still be finishing)."""
        return self._cell.mailbox.closed

    async def tell(self, message: M | Stop, *, priority: bool = False) -> None:
        """Enqueue ``message``, waiting for room when the mailbox is full.

        ``priority=True`` puts it ahead of the normal backlog. Raises ``ActorStopped``
        if the actor is stopped.
        """
        await self._cell.mailbox.put(message, priority=priority)

    def tell_nowait(self, message: M | Stop, *, priority: bool = False) -> None:
        """Enqueue ``message`` now or raise ``MailboxFull`` (or ``ActorStopped``)."""
        self._cell.mailbox.put_nowait(message, priority=priority)

    # The timeout is part of ask's contract (it covers waiting for mailbox room too).
    async def ask(
        self,
        message: M,
        timeout: float | None,  # noqa: ASYNC109
        *,
        priority: bool = False,
    ) -> Any:
        """Send ``message`` and wait for what ``receive`` returns (or raises).

        ``timeout`` (seconds, ``None`` for no limit) covers waiting for mailbox room too;
        when it runs out ``AskTimeout`` is raised. Asking a stopped actor raises
        ``ActorStopped`` at once, and so does an actor that stops before replying.
        """
        if isinstance(message, Stop):
            raise TypeError("Stop is not a question: use tell(Stop()) or stop()")
        if self.is_stopped:
            raise ActorStopped(self.path)
        reply = Reply()
        # move_on_after, not fail_after: a TimeoutError raised by the actor itself is
        # its answer and must reach the caller as it is.
        with anyio.move_on_after(timeout):
            await self._cell.mailbox.put(Ask(message, reply), priority=priority)
            return await reply.wait()
        raise AskTimeout(self.path, message, timeout or 0.0)

    async def stop(self, reason: str = "") -> None:
        """Stop the actor next (a priority stop) and wait until it has terminated:
        its children first, then its ``on_stop``. Stopping a stopped actor is a no-op."""
        self._cell.mailbox.request_stop(reason)
        await self._cell.terminated.wait()

    async def wait_stopped(self) -> None:
        """Wait until the actor has terminated, however it came to stop."""
        await self._cell.terminated.wait()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorRef) and other._cell is self._cell

    def __hash__(self) -> int:
        return id(self._cell)

    def __repr__(self) -> str:
        state = "stopped" if self.is_stopped else "running"
        return f"<ActorRef {self.path!r} {state}>"
