"""Tools that act on the session itself, so they need Navi (``switch_profile``,
``spawn_agent`` from ``navi.subagents``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from navi.session import messages as m
from profiles import UnknownProfile
from tools import Tool, ToolContext, ToolResult, fail, ok

if TYPE_CHECKING:
    from navi.app import Navi


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

    def __init__(self, navi: Navi) -> None:
        self.navi = navi

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            profile = self.navi.profiles.get(args["profile_id"])
        except UnknownProfile as exc:
            return fail(str(exc))
        await self.navi.sessions.ask(ctx.session_id, m.SwitchProfile(profile_id=profile.id))
        return ok(
            f"Switched to the {profile.name} profile ({profile.id}). "
            "Its instructions and tools apply from your next step."
        )


def navi_tools(navi: Navi) -> list[Tool]:
    from navi.subagents import SpawnAgentTool

    return [SwitchProfileTool(navi), SpawnAgentTool(navi)]
