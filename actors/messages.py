"""Messages the runtime itself understands or sends.

``Stop`` is handled by the runtime, never by ``receive``. ``ChildFailed`` and
``ChildStopped`` are lifecycle notifications delivered to a parent's ``receive`` like
any other message (in order, through the normal lane), so a parent decides what a
child's crash means for it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Stop:
    """Stop the actor gracefully.

    Sent normally it is handled in order, after what is already queued; sent with
    ``priority=True`` it is handled next (the message in progress finishes first and
    what is still queued is dropped as dead letters). The actor's children are stopped
    before the actor's own ``on_stop`` runs.
    """

    reason: str = ""


@dataclass(frozen=True, slots=True)
class ChildFailed:
    """A child's ``on_start`` or ``receive`` raised ``error``.

    ``action`` is what its supervision policy does about it: ``"restart"`` (after a
    backoff; ``restarts`` counts restarts within the policy's window), ``"stop"`` (a
    ``ChildStopped`` follows) or ``"escalate"`` (the parent itself fails; in that case
    this message is not delivered, the parent's own supervisor sees the failure).
    """

    name: str
    error: Exception
    action: str = "restart"
    restarts: int = 0


@dataclass(frozen=True, slots=True)
class ChildStopped:
    """A child has terminated: its name is free again."""

    name: str
    reason: str = ""
