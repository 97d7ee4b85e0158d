"""``scratchpad``: named working notes for the session, kept as ``scratchpad.updated`` events."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from events.types import ScratchpadUpdated
from tools.base import Tool, ToolError, ToolResult, ok
from tools.context import ToolContext

# The seeds' per-profile sections; a profile's own list (ProfileInfo) takes precedence.
DEFAULT_SECTIONS: dict[str, tuple[str, ...]] = {
    "secretary": ("findings", "sources", "drafts"),
    "server_admin": ("status", "logs", "errors", "plan"),
    "smart_home": ("state", "config", "errors"),
}
FALLBACK_SECTIONS: tuple[str, ...] = ("notes",)
SECTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


def sections_for(ctx: ToolContext) -> tuple[str, ...]:
    profile = ctx.profile
    return profile.scratchpad_sections or DEFAULT_SECTIONS.get(profile.id, FALLBACK_SECTIONS)


def format_pad(pad: Mapping[str, str], defaults: tuple[str, ...]) -> str:
    names = [*defaults, *(name for name in pad if name not in defaults)]
    blocks = [f"## {name}\n{pad.get(name) or '(empty)'}" for name in names]
    return "\n\n".join(blocks)


class ScratchpadTool(Tool):
    name = "scratchpad"
    uses_files = False
    description = (
        "Your working notes for this session, in named sections (the profile suggests some; "
        "'read' without a section lists them all). 'write' replaces a section, 'append' adds "
        "to it, 'read' shows one or all, 'clear' empties one or all."
    )
    parameters = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["write", "append", "read", "clear"]},
            "section": {
                "type": "string",
                "description": "Section name (letters, digits, _ or -).",
            },
            "content": {"type": "string", "description": "write / append: the text."},
        },
        "required": ["action"],
        "additionalProperties": False,
    }
    timeout_s = 10.0

    def is_idempotent(self, args: dict[str, Any]) -> bool:
        return args.get("action") == "read"

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        action = args["action"]
        section = args.get("section")
        pad = dict(ctx.state.scratchpad())
        defaults = sections_for(ctx)
        if section is not None and not SECTION_NAME.match(section):
            raise ToolError(
                f"invalid section name {section!r}: use 1-40 letters, digits, _ or -; "
                f"suggested sections: {', '.join(defaults)}"
            )
        if action == "read":
            if section is None:
                return ok(format_pad(pad, defaults))
            return ok(f"## {section}\n{pad.get(section) or '(empty)'}")
        if action == "clear":
            targets = [section] if section is not None else list(pad)
            for name in targets:
                if name in pad:
                    await ctx.emit(ScratchpadUpdated(section=name, content=None))
            return ok(f"Cleared {section!r}." if section else "Cleared all sections.")

        if section is None:
            raise ToolError(
                f"action '{action}' needs a 'section' (suggested: {', '.join(defaults)})"
            )
        content = args.get("content")
        if content is None:
            raise ToolError(f"action '{action}' needs 'content'")
        if action == "append" and pad.get(section):
            content = pad[section].rstrip("\n") + "\n" + content
        limit = ctx.settings.scratchpad_max_chars
        if len(content) > limit:
            raise ToolError(
                f"section {section!r} would hold {len(content)} characters, over the limit of "
                f"{limit}; summarise it and write it again"
            )
        await ctx.emit(ScratchpadUpdated(section=section, content=content))
        verb = "Appended to" if action == "append" else "Wrote"
        return ok(f"{verb} {section!r} ({len(content)} characters).")
