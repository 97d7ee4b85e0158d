"""A small actor runtime on anyio: bounded mailboxes, ``tell``/``ask``, children,
supervision and priority messages.

It imports nothing of Navi's but ``events``.
"""

from actors.actor import Actor
from actors.errors import (
    ActorError,
    ActorNameTaken,
    ActorStopped,
    ActorSystemClosed,
    AskTimeout,
    EscalatedFailure,
    InvalidActorName,
    MailboxFull,
    UnknownActor,
)
from actors.messages import ChildFailed, ChildStopped, Stop
from actors.ref import ActorRef
from actors.reply import Reply
from actors.supervision import Backoff, Supervision
from actors.system import ActorSystem

__all__ = [
    "Actor",
    "ActorError",
    "ActorNameTaken",
    "ActorRef",
    "ActorStopped",
    "ActorSystem",
    "ActorSystemClosed",
    "AskTimeout",
    "Backoff",
    "ChildFailed",
    "ChildStopped",
    "EscalatedFailure",
    "InvalidActorName",
    "MailboxFull",
    "Reply",
    "Stop",
    "Supervision",
    "UnknownActor",
]
