"""What a run works with: the session that hosts it (``RunHost``) and the application's
parts it calls (``RunDeps``), plus the few facts every step reads from them.

The session actor (navi/session/actor.py) is the host; this package never imports it
(the state's type only, for the checker), so ``run`` → ``session`` has no arrow back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from events.types import Event
from navi.accounts import Users
from navi.blobs import BlobStore
from navi.config import Settings
from navi.llm.base import LLMBackend
from navi.llm.stop import StopSignal
from navi.run.context_builder import ContextBuilder
from navi.run.limiter import RunLimiter
from profiles import Profile, ProfileRegistry
from projections.user_settings import UserSettings
from tools import ToolRegistry

if TYPE_CHECKING:
    from navi.session.state import SessionState

BackendFor = Callable[[Profile], Awaitable[LLMBackend]]
Hook = Callable[..., Awaitable[object]]
# The driver's commit (RunDriver.commit): what it holds, then a step's own events; False
# when a stop won the race and only the held outcomes were recorded.
Commit = Callable[[Sequence[Event]], Awaitable[bool]]


class RunHost(Protocol):
    """What the driver needs from the session actor that owns the stream."""

    session_id: str
    state: SessionState
    stop_signal: StopSignal

    async def record(self, *events: Event) -> None:
        """Check, append and apply events; returns when they are durable."""

    async def stage(self, event: Event) -> None:
        """Check, stage and apply a chunk event (durable soon, not awaited)."""

    async def request_stop(self, reason: str = "user") -> bool:
        """Record ``stop.requested`` (if not yet) and set the stop signal."""

    async def wait_for_decision(self, deadline: float) -> None:
        """Until the call waiting for approval is decided, a stop, or ``deadline``."""

    async def wait_for_llm(self, deadline: float) -> bool:
        """Until someone asks to try again (True), a stop, or ``deadline`` (the next
        probe)."""

    def slot_given_back(self) -> AbstractAsyncContextManager[None]:
        """While the run waits for the model's server: its slot of the node
        (``NAVI_MAX_LIVE_RUNS``) given back, taken again in line when it goes on."""

    @property
    def data_owner(self) -> RunHost:
        """The session whose files, todo list and notes the tools work on: the host
        itself, or for a subagent its top-level session (also a host)."""


@dataclass
class RunDeps:
    settings: Settings
    profiles: ProfileRegistry
    tools: ToolRegistry
    builder: ContextBuilder
    backend_for: BackendFor
    files_root: Path
    # Who may use which tools (checked before every call: navi/run/permissions.py).
    # Without users files, only the local user is known.
    users: Users = field(default_factory=lambda: Users([], open_access=True))
    # Where images tools return are kept (navi/blobs.py); None: inline in the log.
    blobs: BlobStore | None = None
    # Hooks offered to tools (spawn_agent, switch_profile), built per call by the host.
    tool_hooks: Callable[[RunHost, str], dict[str, Hook | None]] = field(
        default=lambda host, call_id: {}
    )
    # The context window of a profile's model, as its backend tells (Navi.context_window).
    context_window: Callable[[Profile], int] = field(
        default=lambda profile: profile.num_ctx or 65536
    )
    # A user's saved settings (navi/user_settings.py): thinking on/off, approval defaults.
    user_settings: Callable[[str], Awaitable[UserSettings]] = field(default=lambda user_id: _none())
    # The node's limit on runs streaming at once, with its fair queue (NAVI_MAX_LIVE_RUNS).
    live_runs: RunLimiter = field(default_factory=lambda: RunLimiter(0))


async def _none() -> UserSettings:
    return UserSettings()


def active_profile(state: SessionState, deps: RunDeps) -> Profile:
    """The profile the session runs with now (a switch takes effect at the next step)."""
    return deps.profiles.get(state.profile.profile_id or deps.profiles.default_id)


def is_subagent(state: SessionState) -> bool:
    created = state.created
    return created is not None and created.parent_stream_id is not None
