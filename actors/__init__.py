"""A small actor runtime on anyio: bounded mailboxes, ``tell``/``ask``, children,
supervision, priority messages and interrupts, and event-sourced persistent actors.

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
from actors.mailbox import Interrupts, InterruptScope
from actors.messages import ChildFailed, ChildStopped, Stop
from actors.persistent import PersistentActor
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
    "InterruptScope",
    "Interrupts",
    "InvalidActorName",
    "MailboxFull",
    "PersistentActor",
    "Reply",
    "Stop",
    "Supervision",
    "UnknownActor",
]
