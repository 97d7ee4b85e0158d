"""Errors of the actor runtime. Each names the actor (its path) it is about."""

from __future__ import annotations


class ActorError(Exception):
    """Base of every error raised by the actor runtime."""


class ActorStopped(ActorError):
    """The actor has stopped (or is stopping): it takes no more messages."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"actor {path!r} is stopped and takes no more messages")


class MailboxFull(ActorError):
    """``tell_nowait`` found the mailbox at capacity; nothing was enqueued."""

    def __init__(self, path: str, capacity: int, *, priority: bool = False) -> None:
        self.path = path
        self.capacity = capacity
        self.priority = priority
        lane = "priority mailbox" if priority else "mailbox"
        super().__init__(
            f"actor {path!r}: {lane} is full ({capacity} messages); "
            "the message was not enqueued (use `await tell(...)` to wait for room)"
        )


class AskTimeout(ActorError):
    """An ``ask`` got no reply in time. The message may still be handled later."""

    def __init__(self, path: str, message: object, timeout: float) -> None:
        self.path = path
        self.message = message
        self.timeout = timeout
        super().__init__(
            f"actor {path!r} did not reply to {type(message).__name__} within {timeout:g}s"
        )


class ActorNameTaken(ActorError):
    """A sibling with that name is alive already."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"an actor named {path!r} is already running")


class InvalidActorName(ActorError, ValueError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"invalid actor name {name!r}: it must be non-empty and contain no '/'")


class UnknownActor(ActorError, LookupError):
    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"no running actor named {path!r}")


class ActorSystemClosed(ActorError):
    """The system is shutting down (or was never entered): it spawns nothing more."""

    def __init__(self) -> None:
        super().__init__("the actor system is not running (use `async with ActorSystem()`)")


class EscalatedFailure(ActorError):
    """A child failed under an ``escalate`` policy; its parent fails with this error."""

    def __init__(self, child_path: str, error: BaseException) -> None:
        self.child_path = child_path
        self.error = error
        super().__init__(f"child {child_path!r} failed and escalated: {error!r}")
