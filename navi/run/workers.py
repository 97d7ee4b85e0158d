"""Post-turn workers: run in order after ``run.completed``; their results are events.

A worker gets the session (through the same host interface the run driver uses: it
reads the state and records events) and whatever LLM access it was built with. A
failing worker is logged and the next one runs: a worker never fails the turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from navi.run.host import RunHost

log = structlog.get_logger(__name__)

Worker = Callable[["RunHost"], Awaitable[None]]


async def run_workers(host: RunHost, workers: Sequence[Worker]) -> None:
    for worker in workers:
        name = getattr(worker, "name", type(worker).__name__)
        try:
            await worker(host)
        except Exception as exc:
            log.exception("worker.failed", worker=name, session_id=host.session_id, error=str(exc))
