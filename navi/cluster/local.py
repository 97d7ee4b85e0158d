"""What the inbox delivery and the sweeps use of their node: the actors of the sessions
it holds. ``ClusterNode`` is the one implementation; the helpers get only this."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol


class LocalSessions(Protocol):
    def holding(self, session_id: str) -> AbstractAsyncContextManager[bool]:
        """Whether this node owns the session; not released as idle meanwhile."""
        ...

    async def ask_here(self, session_id: str, message: object, *, wait_s: float = ...) -> Any:
        """Ask the session's actor on this node (it must own the session)."""
        ...

    async def start_here(self, session_id: str) -> bool:
        """Start the session's actor on this node (it must own the session), which
        continues a run its log shows open; False if it was running already."""
        ...

    def idle_for(self, session_id: str, now: float) -> float:
        """Seconds since the session was last used here."""
        ...

    async def release(self, session_id: str) -> None:
        """Stop the session's actor here and let the session go to the cluster."""
        ...
