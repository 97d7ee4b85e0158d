"""``ActorCell``: the runtime around one actor instance (its mailbox, task, children,
supervision). Users never touch it; ``Actor`` and ``ActorRef`` are the interface.

Life of a cell, all in one task:

    on_start → loop { next message → receive } → (failure → policy) → stop sequence

The stop sequence: close the mailbox (queued asks fail with ``ActorStopped``, the rest
are dead letters), stop the children and wait for them, run ``on_stop``, then tell
the parent ``ChildStopped``. If the task is cancelled instead, only the synchronous
part runs (mailbox closed, replies failed, name freed) and the cancellation goes on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from anyio.abc import TaskGroup, TaskStatus

from actors.errors import (
    ActorError,
    ActorNameTaken,
    ActorStopped,
    EscalatedFailure,
    InvalidActorName,
    MailboxFull,
)
from actors.mailbox import Mailbox
from actors.messages import ChildFailed, ChildStopped, Stop
from actors.ref import ActorRef, Ask
from actors.reply import Reply
from actors.supervision import RestartWindow, Supervision

if TYPE_CHECKING:
    from actors.actor import Actor
    from actors.system import ActorSystem

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Escalation:
    """Sent by a child whose policy is ``escalate``: the parent fails with it."""

    name: str
    error: Exception


def check_name(name: str) -> None:
    if not isinstance(name, str) or not name or "/" in name:
        raise InvalidActorName(name)


class ActorCell:
    path: str
    terminated: anyio.Event

    def __init__(
        self,
        system: ActorSystem,
        actor: Actor[Any],
        name: str,
        *,
        parent: ActorCell | None,
        supervision: Supervision,
    ) -> None:
        check_name(name)
        previous = actor._cell
        if previous is not None and not previous.terminated.is_set():
            raise ActorError(f"this {type(actor).__name__} is already running as {previous.path!r}")
        self.system = system
        self.actor = actor
        self.name = name
        self.parent = parent
        self.path = name if parent is None else f"{parent.path}/{name}"
        self.mailbox = Mailbox(self.path, actor.mailbox_size, actor.priority_mailbox_size)
        self.ref: ActorRef[Any] = ActorRef(self)
        self.children: dict[str, ActorCell] = {}
        self.terminated = anyio.Event()
        self._restarts = RestartWindow(supervision)
        self._tg: TaskGroup | None = None
        self._current_reply: Reply | None = None
        self._deferred_replies: set[Reply] = set()
        actor._cell = self

    # ---------------------------------------------------------------- children

    async def spawn_child(
        self, actor: Actor[Any], name: str, supervision: Supervision
    ) -> ActorRef[Any]:
        check_name(name)
        if self._tg is None or self.mailbox.closed:
            raise ActorStopped(self.path)
        if name in self.children:
            raise ActorNameTaken(f"{self.path}/{name}")
        child = ActorCell(self.system, actor, name, parent=self, supervision=supervision)
        self.children[name] = child
        self.system._register(child)
        await self._tg.start(child.run, name=child.path)  # a name: anyio need not derive one
        return child.ref

    def start_soon(self, func: Callable[[], Coroutine[Any, Any, object]], name: str) -> None:
        if self._tg is None:
            raise ActorStopped(self.path)
        self._tg.start_soon(func, name=f"{self.path}/{name}")

    async def _stop_children(self, reason: str) -> None:
        children = list(self.children.values())
        for child in children:
            child.mailbox.request_stop(reason)
        for child in children:
            await child.terminated.wait()

    # ---------------------------------------------------------------- replies

    def defer_reply(self) -> Reply:
        reply = self._current_reply
        if reply is None:
            raise ActorError("defer_reply() is only possible while handling an ask")
        self._current_reply = None
        self._deferred_replies = {r for r in self._deferred_replies if not r.done}
        self._deferred_replies.add(reply)
        return reply

    async def _deliver(self, message: object) -> None:
        if not isinstance(message, Ask):
            await self.actor.receive(message)
            return
        self._current_reply = message.reply
        try:
            result = await self.actor.receive(message.message)
        except Exception as error:
            if self._current_reply is not None:
                self._current_reply.fail(error)
            raise
        else:
            if self._current_reply is not None:
                self._current_reply.set(result)
        finally:
            # Cancelled mid-receive: the asker must not wait for its timeout.
            if self._current_reply is not None:
                self._current_reply.fail(ActorStopped(self.path))
            self._current_reply = None

    # ---------------------------------------------------------------- the task

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        reason = ""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                reason = await self._live()
        finally:
            self._terminate()
        await self._notify_parent(ChildStopped(self.name, reason), give_up_on_stop=False)

    async def _live(self) -> str:
        """Run incarnations until a stop; return the stop reason."""
        while True:
            outcome = await self._incarnation()
            if isinstance(outcome, Stop):
                reason = outcome.reason
                break
            error = outcome
            decision = self._restarts.decide()
            action = decision.action
            if action == "escalate" and self.parent is None:
                action = "stop"  # nobody above to escalate to
            log.warning(
                "actor.failed",
                actor=self.path,
                action=action,
                restarts=decision.restarts,
                error=repr(error),
                exc_info=error,
            )
            if action == "escalate":
                await self._notify_parent(Escalation(self.name, error), give_up_on_stop=True)
                reason = "escalated"
                break
            await self._notify_parent(
                ChildFailed(self.name, error, action, decision.restarts), give_up_on_stop=True
            )
            if action == "stop":
                reason = "failed"
                break
            await self._stop_children("parent restarting")
            if await self._backoff(decision.delay):
                reason = self.mailbox.stop_reason
                break
        self._drop_dead_letters(self.mailbox.close())
        await self._stop_children("parent stopping")
        try:
            await self.actor.on_stop()
        except Exception:
            log.exception("actor.on_stop_failed", actor=self.path)
        return reason

    async def _incarnation(self) -> Stop | Exception:
        """``on_start`` then messages, until a stop (returned) or a failure (returned)."""
        try:
            await self.actor.on_start()
        except Exception as error:
            return error
        while True:
            message = await self.mailbox.get()
            if isinstance(message, Stop):
                return message
            if isinstance(message, Escalation):
                return EscalatedFailure(f"{self.path}/{message.name}", message.error)
            try:
                await self._deliver(message)
            except Exception as error:
                return error

    async def _backoff(self, delay: float) -> bool:
        """Sleep before a restart; cut short by a stop request (then return True)."""
        with anyio.move_on_after(delay):
            await self.mailbox.stop_requested.wait()
        return self.mailbox.stop_requested.is_set()

    async def _notify_parent(self, message: object, *, give_up_on_stop: bool) -> None:
        parent = self.parent
        if parent is None:
            return
        try:
            parent.mailbox.put_nowait(message)
            return
        except ActorStopped:
            return
        except MailboxFull:
            pass
        # The parent's mailbox is full. Wait for room, but a failing child must not
        # block a parent that is meanwhile stopping it (the parent waits for us).
        async with anyio.create_task_group() as tg:
            if give_up_on_stop:

                async def give_up() -> None:
                    await self.mailbox.stop_requested.wait()
                    log.warning("actor.notification_dropped", actor=self.path, message=message)
                    tg.cancel_scope.cancel()

                tg.start_soon(give_up)
            with contextlib.suppress(ActorStopped):
                await parent.mailbox.put(message)
            tg.cancel_scope.cancel()

    def _drop_dead_letters(self, messages: list[object]) -> None:
        for message in messages:
            if isinstance(message, Ask):
                message.reply.fail(ActorStopped(self.path))
        if messages:
            log.info("actor.dead_letters", actor=self.path, count=len(messages))

    def _terminate(self) -> None:
        """Synchronous, so it also runs when the task is cancelled."""
        if not self.mailbox.closed:
            self._drop_dead_letters(self.mailbox.close())
        for reply in self._deferred_replies:
            reply.fail(ActorStopped(self.path))
        self._deferred_replies.clear()
        if self.parent is not None and self.parent.children.get(self.name) is self:
            del self.parent.children[self.name]
        self.system._unregister(self)
        self.terminated.set()
