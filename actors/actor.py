"""The ``Actor`` base class: one message at a time, in its own task."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from actors.errors import ActorError
from actors.ref import ActorRef
from actors.reply import Reply
from actors.supervision import Supervision

if TYPE_CHECKING:
    from actors.cell import ActorCell

M = TypeVar("M")
C = TypeVar("C")


class Actor(Generic[M]):
    """Subclass and implement ``receive``; spawn with ``ActorSystem.spawn`` or
    ``spawn_child``.

    ``receive`` handles one message at a time; for an ``ask`` its return value (or the
    exception it raises) is the reply. An exception is a failure: the asker gets it,
    the parent gets ``ChildFailed`` and the supervision policy decides what follows.
    A restart runs ``on_start`` again on the same instance, so an actor whose fields
    must start fresh resets them there. A parent also receives ``ChildFailed`` and
    ``ChildStopped`` notifications through ``receive``.
    """

    mailbox_size: ClassVar[int] = 64
    priority_mailbox_size: ClassVar[int] = 8
    # The policy of the children this actor spawns, unless spawn_child says otherwise.
    child_supervision: ClassVar[Supervision] = Supervision()

    _cell: ActorCell | None = None

    # ---------------------------------------------------------------- to override

    async def on_start(self) -> None:
        """Runs before the first message, and again after each restart."""

    async def on_stop(self) -> None:
        """Runs once on a graceful stop, after the children have stopped. Not run when
        the actor is cancelled (the system's shutdown timeout)."""

    async def receive(self, message: M) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement receive()")

    # ---------------------------------------------------------------- runtime access

    @property
    def cell(self) -> ActorCell:
        if self._cell is None:
            raise ActorError(f"{type(self).__name__} is not spawned yet")
        return self._cell

    @property
    def ref(self) -> ActorRef[M]:
        return self.cell.ref

    @property
    def name(self) -> str:
        return self.cell.name

    @property
    def path(self) -> str:
        return self.cell.path

    @property
    def children(self) -> dict[str, ActorRef[Any]]:
        return {name: child.ref for name, child in self.cell.children.items()}

    async def spawn_child(
        self, actor: Actor[C], name: str, *, supervision: Supervision | None = None
    ) -> ActorRef[C]:
        """Start ``actor`` as a child: it is stopped before this actor stops (or
        restarts), and its failures and its end reach this actor as messages."""
        return await self.cell.spawn_child(actor, name, supervision or self.child_supervision)

    def start_soon(self, func: Callable[[], Coroutine[Any, Any, object]], name: str) -> None:
        """Run ``func()`` as a task of this actor, beside its message loop: the actor's
        task ends only once it has returned (or cancels it, if the actor is cancelled),
        so a graceful stop must end it (``on_stop``)."""
        self.cell.start_soon(func, name)

    def stop(self, reason: str = "") -> None:
        """Stop this actor once the current message is handled."""
        self.cell.mailbox.request_stop(reason)

    async def stop_requested(self) -> None:
        """Returns once this actor is asked to stop (e.g. the system shuts down): for a
        message whose handling may wait indefinitely and should end sooner."""
        await self.cell.mailbox.stop_requested.wait()

    def defer_reply(self) -> Reply:
        """Take over the reply to the ask being handled, to complete it later (from
        another message or a child's answer). If the actor stops first, the asker
        gets ``ActorStopped``."""
        return self.cell.defer_reply()
