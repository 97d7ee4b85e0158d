"""Which tools a run may call, checked where tools run.

A tool may be called when the active profile enables it (a subagent: the profile's
``subagent_tools``, else its ``enabled_tools``; tools of ``enabled.json`` count as
enabled everywhere) and the session's owner may use it (their role and grants:
navi/accounts.py). The LLM is offered only those tools, and a call of any other
becomes ``tool.failed`` with a message it can act on: the model reads hostile text
and may name any tool, so what it is offered is not what it may do.

The owner is the ``user_id`` of the session's ``session.created`` (a subagent's is its
parent's), so the same check holds after a restart, when a run resumes.
"""

from __future__ import annotations

from navi.accounts import Users
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
) -> str | None:
    """Why this call may not run, or None when it may. A tool that does not exist is
    left to the registry, whose answer names the tools that do."""
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
    return users.refusal(user_id, name, restricted=builder.tools.is_user_tool(name))
