"""What a tool call knows about the world it runs in, all passed in by the caller."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
import msgspec

from events.types import Event, TodoItem
from tools.settings import ToolSettings


class StopSignal(Protocol):
    """The run's cooperative stop (navi's StopSignal and ``anyio.Event`` both fit).

    A signal may also have ``scope(deadline)``: a cancel scope (ending at ``deadline``)
    that the signal cancels when it fires. The registry then runs a call inside it;
    without it, a task waits for the signal beside each call."""

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


class NeverStop:
    """A stop signal that never fires, for calls outside a run."""

    def is_set(self) -> bool:
        return False

    async def wait(self) -> None:
        await anyio.sleep_forever()

    def scope(self, deadline: float) -> anyio.CancelScope:
        return anyio.CancelScope(deadline=deadline)


class SessionToolState(Protocol):
    """Read access to the session-state projections tools need (the log is the truth)."""

    def todo(self) -> Sequence[TodoItem]: ...

    def scratchpad(self) -> Mapping[str, str]: ...

    def notes(self) -> Mapping[str, str]: ...


class OutboundConsent(Protocol):
    """What the user allowed one call's web requests to reach (navi/run/approval.py):
    ``private_ok``: private and local addresses too (the profile's and the operator's
    rules still apply); ``refusal(url)``: why a redirect to ``url`` may not be followed
    without asking the user, or None."""

    @property
    def private_ok(self) -> bool: ...

    def refusal(self, url: str) -> str | None: ...


EmitFn = Callable[[Event], Awaitable[None]]
# A running call's progress: (progress, total or None, message). Recorded as
# ``tool.progress``, bounded and rate-limited by the caller (navi/run/tool_progress.py).
ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
# Future hooks (spawn_agent, switch_profile) are opaque callables the navi layer provides.
Hook = Callable[..., Awaitable[Any]]


@dataclass(frozen=True, kw_only=True)
class ProfileInfo:
    """The few profile values tools need, as plain data (tools never import profiles)."""

    id: str = ""
    name: str = ""
    # Empty: the scratchpad's built-in defaults for ``id`` are used.
    scratchpad_sections: tuple[str, ...] = ()
    step_validation_enabled: bool = False
    # Sandboxed tools (code_exec, terminal) may use the network: the profile's, if the
    # session's account has the grant (navi/grants.py).
    tool_network: bool = False
    # http_request, web_view, image_view may reach private (LAN) addresses: likewise.
    allow_private_urls: bool = False


class ToolContext(msgspec.Struct, frozen=True, kw_only=True):
    """Made for every call of the loop: a Struct, built in C (a frozen dataclass set its
    twelve fields one ``object.__setattr__`` at a time)."""

    session_id: str
    files_dir: Path
    # Records a session-state event (todo, scratchpad, notes) in the session's log; for a
    # subagent it may be a different sink, which is how a child's scratchpad stays its own.
    emit: EmitFn
    state: SessionToolState
    user_id: str = "local"
    stop: StopSignal = msgspec.field(default_factory=NeverStop)
    settings: ToolSettings = msgspec.field(default_factory=ToolSettings)
    profile: ProfileInfo = msgspec.field(default_factory=ProfileInfo)
    call_id: str = ""
    spawn: Hook | None = None
    switch_profile: Hook | None = None
    # None: no consent rule (a call without web requests, NAVI_TOOL_APPROVAL=auto).
    outbound: OutboundConsent | None = None
    # Bytes the user may still store (NAVI_USER_QUOTA_MB, navi/quota.py): at most what a
    # sandboxed call may write. None: no quota is kept (no blob store, or outside a run).
    storage_left: int | None = None
    # Says how far the call has got while it runs (an MCP server's progress); None:
    # nobody listens (outside a run).
    progress: ProgressFn | None = None

    @property
    def write_limit_bytes(self) -> int:
        """What one sandboxed call may add to the folders it writes: the operator's
        NAVI_SANDBOX_WRITE_LIMIT_MB, or what is left of the user's quota if less."""
        limit = self.settings.sandbox_write_limit_mb * 1024 * 1024
        return limit if self.storage_left is None else max(0, min(limit, self.storage_left))

    @classmethod
    def standalone(
        cls,
        session_id: str,
        files_dir: Path,
        **kwargs: Any,
    ) -> ToolContext:
        """A context whose state lives in memory: for tests, ephemeral runs and scripts."""
        from tools.state import InMemoryToolState

        state = kwargs.pop("state", None) or InMemoryToolState()
        return cls(
            session_id=session_id,
            files_dir=files_dir,
            emit=state.apply_async,
            state=state,
            **kwargs,
        )
