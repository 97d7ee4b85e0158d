"""Which tool calls wait for a person: the approval policy of one call.

A call's policy is ``auto`` (it runs at once), ``ask`` (it waits for the user's decision,
recorded in the log) or ``deny`` (it never runs). The first rule that names the call's
tool decides:

1. the profile's ``tool_policy`` (``{"terminal": "auto", "code_exec": "ask"}``);
2. the user's own defaults (their settings page);
3. the operator's ``NAVI_TOOL_APPROVAL`` (``ask`` | ``auto``), for every tool;
4. the tool's own default: ``ask`` for the tools that act on the machine (code_exec,
   terminal, ssh_exec, write_tool, reload_tools, filesystem writes, http_request other
   than GET/HEAD, user tools and external tools that do not declare themselves
   read-only, switch_profile and spawn_agent into a profile that loosens safety),
   ``auto`` for the rest.

A call that would ``ask`` runs without asking when the user approved its tool "for this
session" before (``tool.approval_decided`` with scope ``session``, in the log).

The run records the outcome (navi/run/driver.py): ``tool.approval_requested`` with the
policy's ``source``, then the decision, or ``tool.failed(reason="denied")`` for a
``deny``.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from events.types import ToolCall
from profiles import Profile
from tools import ToolRegistry
from tools.base import Approval


class Policy(msgspec.Struct, frozen=True):
    approval: Approval
    source: str  # which rule decided, in words the user reads on the approval card


def policy_for(
    call: ToolCall,
    *,
    tools: ToolRegistry,
    profile: Profile,
    operator: str,
    user: Mapping[str, str],
    approved_tools: frozenset[str],
) -> Policy:
    """The policy of ``call`` (see the module doc for the order of the rules)."""
    name = call.name
    if name in profile.tool_policy:
        policy = Policy(profile.tool_policy[name], f"profile {profile.id}")
    elif user.get(name) in ("auto", "ask", "deny"):
        policy = Policy(user[name], "your settings")  # type: ignore[arg-type]
    elif operator in ("auto", "ask"):
        policy = Policy(operator, "NAVI_TOOL_APPROVAL")  # type: ignore[arg-type]
    else:
        policy = Policy(tools.approval_for(name, call.arguments), f"{name}'s default")
    if policy.approval == "ask" and name in approved_tools:
        return Policy("auto", "approved for this session")
    return policy


def approval_report(operator: str) -> tuple[str, str]:
    """What ``navi serve`` logs at start-up and ``navi doctor`` prints: ("ok" | "warning",
    the sentence)."""
    if operator == "auto":
        return "warning", (
            "NAVI_TOOL_APPROVAL=auto: tools run WITHOUT asking anyone (code_exec, terminal, "
            "file writes, external tools); meant for scripts and test rigs"
        )
    if operator == "ask":
        return "ok", "approvals: every tool call waits for a person (NAVI_TOOL_APPROVAL=ask)"
    return "ok", (
        "approvals: code_exec, terminal, ssh_exec, file writes, non-GET http_request, "
        "write_tool, reload_tools, external tools and entering a profile with a wider reach "
        "ask first"
    )


def denied_message(reason: str) -> str:
    """What the LLM reads when the user declined a call."""
    said = reason.strip()
    return "The user declined this call" + (f": {said}" if said else ".")


POLICY_DENIED = "The approval policy does not allow this tool ({source})."
TIMED_OUT = "No one approved this call within {seconds:g} s, so it did not run."
