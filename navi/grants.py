"""Grants: the reach an account has beyond the defaults, given in the users file.

A profile may widen what its tools do: reach private (LAN) addresses
(``allow_private_urls``), use the network inside the sandbox (``tool_network``), run a
tool without asking (a ``tool_policy`` of ``auto``). Picking a profile is not consent
to that: any user may name any profile, and so may an LLM that read a hostile page.
So each widening needs a grant on the account (``Profile.needed_grants``):

    {"id": "bob", "token_sha256": "…", "role": "user", "grants": ["lan", "tool_network"]}

An ``admin`` has every grant; a ``user`` only those listed. Checked twice:

- when a session enters a profile: created in it (``POST /sessions``, a ``/v1`` chat, a
  subagent), switched into it (``PATCH /sessions/{id}/profile``, the LLM's
  ``switch_profile``), a subagent spawned in it (``spawn_agent``). Refused with 403, or
  for the LLM's calls a failed tool call it reads (navi/session/actor.py,
  navi/run/permissions.py);
- where tools run, whatever profile the session is in (one created before a grant was
  withdrawn, an imported or a forked one): ``granted_profile`` turns off what the
  account lacks, so its LAN requests are refused, its sandbox has no network and the
  profile's ``auto`` rules do not apply (navi/run/tool_step.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from navi.session.errors import SessionError
from profiles import Profile

if TYPE_CHECKING:
    from navi.accounts import User, Users

# Every grant, with what it allows, in the words of the error that names a missing one.
GRANTS: dict[str, str] = {
    "lan": "reach private (LAN) addresses with http_request, web_view and image_view",
    "tool_network": "use the network inside the sandbox of code_exec and terminal",
    "auto_approval": "run tools that the profile's tool_policy runs without asking",
}
# The tools that make a run enter another profile (its ``profile_id`` argument).
ENTERING_TOOLS = frozenset({"switch_profile", "spawn_agent"})


class GrantRequired(SessionError):
    """The account lacks a grant the profile needs."""

    status = 403


def missing_grants(user: User | None, profile: Profile) -> tuple[str, ...]:
    """The grants ``profile`` needs that ``user`` does not have (all of them for a user
    the server does not know: fail closed)."""
    return tuple(g for g in profile.needed_grants if user is None or not user.has_grant(g))


def entry_refusal(user: User | None, user_id: str, profile: Profile) -> str | None:
    """Why ``user`` may not have a session in ``profile``, or None when they may."""
    missing = missing_grants(user, profile)
    if not missing:
        return None
    needs = "; ".join(f"'{g}' (to {GRANTS.get(g, g)})" for g in missing)
    listed = ", ".join(f'"{g}"' for g in missing)
    return (
        f"user {user_id} may not use profile {profile.id}: it needs the account grant "
        f"{needs}, which an admin gives in the users file "
        f'("grants": [{listed}] on {user_id}); use another profile'
    )


def check_entry(users: Users, user_id: str, profile: Profile) -> None:
    """Raise ``GrantRequired`` unless the session's owner may enter ``profile``."""
    refusal = entry_refusal(users.get(user_id), user_id, profile)
    if refusal is not None:
        raise GrantRequired(refusal)


def granted_profile(profile: Profile, user: User | None) -> Profile:
    """``profile`` as its tools may act for ``user``: each widening the account has no
    grant for is turned off (the same object when nothing is)."""
    missing = missing_grants(user, profile)
    if not missing:
        return profile
    changes: dict[str, object] = {}
    if "lan" in missing:
        changes["allow_private_urls"] = False
    if "tool_network" in missing:
        changes["tool_network"] = False
    if "auto_approval" in missing:
        kept = {tool: rule for tool, rule in profile.tool_policy.items() if rule != "auto"}
        changes["tool_policy"] = kept
    return msgspec.structs.replace(profile, **changes)
