"""Which tools a run may call, checked where tools run.

A tool may be called when the active profile enables it (a subagent: the profile's
``subagent_tools``, else its ``enabled_tools``; tools of ``enabled.json`` count as
enabled everywhere) and the session's owner may use it (their role and grants:
navi/accounts.py). The LLM is offered only those tools, and a call of any other
becomes ``tool.failed`` with a message it can act on: the model reads hostile text
and may name any tool, so what it is offered is not what it may do. A
``switch_profile`` or ``spawn_agent`` call into a profile whose reach the owner has no
grant for fails the same way, before anyone is asked to approve it (navi/grants.py).

The owner is the ``user_id`` of the session's ``session.created`` (a subagent's is its
parent's), so the same check holds after a restart, when a run resumes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from navi.accounts import Users
from navi.grants import ENTERING_TOOLS, entry_refusal
from navi.run.context_builder import ContextBuilder
from profiles import Profile


def allowed_tools(
    builder: ContextBuilder, users: Users, profile: Profile, *, subagent: bool, user_id: str
) -> list[str]:
    """The tools the LLM is offered, in the profile's order."""
    return [
        name
        for name in builder.tool_names(profile, subagent=subagent)
        if users.refusal(user_id, name, restricted=builder.tools.is_user_tool(name)) is None
    ]


def refusal(
    builder: ContextBuilder,
    users: Users,
    name: str,
    profile: Profile,
    *,
    subagent: bool,
    user_id: str,
    arguments: Mapping[str, Any] | None = None,
) -> str | None:
    """Why this call (of ``name`` with ``arguments``) may not run, or None when it may.
    A tool that does not exist is left to the registry, whose answer names the tools
    that do."""
    if builder.tools.get(name) is None:
        return None
    enabled = builder.tool_names(profile, subagent=subagent)
    if name not in enabled:
        whose = f"profile {profile.id}" + (" for subagents" if subagent else "")
        usable = allowed_tools(builder, users, profile, subagent=subagent, user_id=user_id)
        return (
            f"tool {name} is not enabled in {whose}; the tools you may call are: "
            f"{', '.join(usable) or 'none'}"
        )
    refused = users.refusal(user_id, name, restricted=builder.tools.is_user_tool(name))
    if refused is None and name in ENTERING_TOOLS:
        refused = _entry_refusal(builder, users, name, profile, user_id, arguments or {})
    return refused


def _entry_refusal(
    builder: ContextBuilder,
    users: Users,
    name: str,
    profile: Profile,
    user_id: str,
    arguments: Mapping[str, Any],
) -> str | None:
    """Why the owner may not enter the profile this call enters (``spawn_agent``
    without a ``profile_id``: the run's own); an unknown id is the tool's to refuse."""
    target = arguments.get("profile_id") or (profile.id if name == "spawn_agent" else None)
    if not isinstance(target, str) or target not in builder.profiles:
        return None
    refused = entry_refusal(users.get(user_id), user_id, builder.profiles.get(target))
    if refused is None:
        return None
    return f"{refused}, or tell the user that an admin can grant it"
