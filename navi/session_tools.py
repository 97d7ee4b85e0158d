"""The tools that act on the session itself (``switch_profile`` here, ``spawn_agent``
in ``navi.subagents``) and the hooks the run offers them.

They act through their ``ToolContext``'s hooks, bound by ``SessionTools.hooks`` to the
session actor whose run calls them: a switch is recorded in that session by the run
itself, never sent back into the session's own mailbox. ``SessionTools`` holds the few
parts they use, not the whole ``Navi``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from events.types import ProfileSwitched
from navi.grants import GrantRequired, check_entry
from navi.session.actor import SessionActor
from navi.subagents import SpawnAgentTool, Spawner, entered_name, entered_risk
from profiles import Profile, ProfileRegistry, UnknownProfile
from tools import Tool, ToolContext, ToolResult, fail, ok
from tools.base import Approval, CallDescription, SessionScope
from tools.context import Hook

if TYPE_CHECKING:
    from events.store import EventStore


class SwitchProfileTool(Tool):
    name = "switch_profile"
    uses_files = False
    description = (
        "Switch this conversation to another agent profile when the user's request belongs "
        "to another domain (e.g. server administration, smart home). The new profile's "
        "instructions and tools apply from your next step. Call list_profiles-style "
        "knowledge from your instructions; unknown ids are refused with the list of ids."
    )
    parameters = {
        "type": "object",
        "properties": {
            "profile_id": {"type": "string", "description": "The id of the profile to use."}
        },
        "required": ["profile_id"],
        "additionalProperties": False,
    }
    idempotent = True
    timeout_s = 30.0

    def __init__(self, profiles: ProfileRegistry) -> None:
        self.profiles = profiles

    def approval_for(self, args: dict[str, Any]) -> Approval:
        return "ask" if self.profiles.entering_asks(args.get("profile_id")) else "auto"

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        profile_id = str(args.get("profile_id", ""))
        name = entered_name(self.profiles, profile_id)
        return CallDescription(
            summary=f"Switch this chat to the profile {name}",
            target=name,
            risk=entered_risk(self.profiles, profile_id, "this chat's"),
            default_asker="Navi asks before entering a profile with a wider reach",
            scope=SessionScope(f"switch_profile:{profile_id}", f"Allow switching to {name}"),
        )

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if ctx.switch_profile is None:
            return fail("switch_profile works only inside a session's run")
        try:
            profile: Profile = await ctx.switch_profile(args["profile_id"])
        except (UnknownProfile, GrantRequired) as exc:
            return fail(str(exc))
        return ok(
            f"Switched to the {profile.name} profile ({profile.id}). "
            "Its instructions and tools apply from your next step."
        )


class ProfileSwitcher:
    """The ``switch_profile`` hook of one call: records ``profile.switched`` in the
    session that runs it (raises ``UnknownProfile`` for an unknown id, ``GrantRequired``
    for a profile whose reach the session's owner has no grant for)."""

    def __init__(self, session: SessionActor, profiles: ProfileRegistry) -> None:
        self.session = session
        self.profiles = profiles

    async def __call__(self, profile_id: str) -> Profile:
        profile = self.profiles.get(profile_id)
        check_entry(self.session.deps.run.users, self.session.state.user_id, profile)
        await self.session.record(ProfileSwitched(profile_id=profile.id, profile_name=profile.name))
        return profile


class SessionTools:
    """``switch_profile`` and ``spawn_agent``, and the driver's ``tool_hooks`` for them."""

    def __init__(
        self, profiles: ProfileRegistry, store: EventStore, new_id: Callable[[], str]
    ) -> None:
        self.profiles = profiles
        self.store = store
        self.new_id = new_id
        self.spawn_agent = SpawnAgentTool(profiles)
        self.switch_profile = SwitchProfileTool(profiles)

    def tools(self) -> list[Tool]:
        return [self.switch_profile, self.spawn_agent]

    def hooks(self, host: object, call_id: str) -> dict[str, Hook | None]:
        """The hooks of one tool call of ``host``'s run (none outside a session actor)."""
        if not isinstance(host, SessionActor):
            return {}
        spawner = Spawner(
            host,
            call_id,
            store=self.store,
            new_id=self.new_id,
            timeout_s=self.spawn_agent.subagent_timeout_s,
        )
        return {"spawn": spawner, "switch_profile": ProfileSwitcher(host, self.profiles)}
