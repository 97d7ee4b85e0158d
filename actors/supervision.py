"""What happens when an actor's ``on_start`` or ``receive`` raises.

A policy belongs to the child and is chosen by whoever spawns it. On a failure the
parent is told (``ChildFailed``) and then, by policy:

- ``restart``: wait an exponential backoff, stop the actor's children, run ``on_start``
  again on the same instance and go on with the next message (the failed message is
  not retried). More than ``max_restarts`` failures within ``within`` seconds stop the
  actor instead.
- ``stop``: the actor stops (children first, then ``on_stop``); ``ChildStopped`` follows.
- ``escalate``: the actor stops and its parent fails with ``EscalatedFailure``, to be
  handled by the parent's own policy. At the top level escalation is a stop.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import anyio

Action = Literal["restart", "stop", "escalate"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delay before restart number ``n`` (1-based): ``initial * factor ** (n - 1)``,
    capped at ``maximum`` seconds."""

    initial: float = 0.1
    factor: float = 2.0
    maximum: float = 10.0

    def __post_init__(self) -> None:
        if self.initial < 0 or self.factor < 1 or self.maximum < 0:
            raise ValueError(
                f"invalid backoff {self!r}: initial and maximum must be >= 0, factor >= 1"
            )

    def delay(self, attempt: int) -> float:
        return float(min(self.maximum, self.initial * self.factor ** max(0, attempt - 1)))


@dataclass(frozen=True, slots=True)
class Supervision:
    on_failure: Action = "restart"
    max_restarts: int = 3
    within: float = 60.0
    backoff: Backoff = field(default_factory=Backoff)

    def __post_init__(self) -> None:
        if self.on_failure not in ("restart", "stop", "escalate"):
            raise ValueError(
                f"unknown supervision action {self.on_failure!r}: "
                "use 'restart', 'stop' or 'escalate'"
            )
        if self.max_restarts < 0 or self.within <= 0:
            raise ValueError(
                f"invalid supervision {self!r}: max_restarts must be >= 0 and within > 0"
            )

    @classmethod
    def restart(
        cls, *, max_restarts: int = 3, within: float = 60.0, backoff: Backoff | None = None
    ) -> Supervision:
        return cls("restart", max_restarts, within, backoff or Backoff())

    @classmethod
    def stop(cls) -> Supervision:
        return cls("stop")

    @classmethod
    def escalate(cls) -> Supervision:
        return cls("escalate")


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    restarts: int = 0  # restarts within the window, this one included
    delay: float = 0.0


class RestartWindow:
    """Remembers the times of recent restarts (at most ``max_restarts`` + 1 of them)."""

    def __init__(self, policy: Supervision) -> None:
        self.policy = policy
        self._times: deque[float] = deque(maxlen=policy.max_restarts + 1)

    def decide(self) -> Decision:
        policy = self.policy
        if policy.on_failure != "restart":
            return Decision(policy.on_failure)
        now = anyio.current_time()
        while self._times and now - self._times[0] > policy.within:
            self._times.popleft()
        if len(self._times) >= policy.max_restarts:
            return Decision("stop", restarts=len(self._times))
        self._times.append(now)
        restarts = len(self._times)
        return Decision("restart", restarts=restarts, delay=policy.backoff.delay(restarts))
