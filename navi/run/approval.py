"""Which tool calls wait for a person: the approval policy of one call.

A call's policy is ``auto`` (it runs at once), ``ask`` (it waits for the user's decision,
recorded in the log) or ``deny`` (it never runs). The first rule that names the call's
tool decides:

1. the profile's ``tool_policy`` (``{"terminal": "auto", "code_exec": "ask"}``);
2. the user's own defaults (their settings page);
3. the operator's ``NAVI_TOOL_APPROVAL`` (``ask`` | ``auto``), for every tool;
4. the tool's own default: ``ask`` for the tools that act on the machine (code_exec,
   terminal, ssh_exec, write_tool, reload_tools, filesystem writes, memory_remember, memory_forget,
   http_request other than GET/HEAD, user tools and external tools that do not declare themselves
   read-only, switch_profile and spawn_agent into a profile that loosens safety),
   ``auto`` for the rest.

Then, in this order:

- **the operator's floor**: with ``NAVI_TOOL_APPROVAL=ask`` no rule makes a call
  ``auto`` (a ``deny`` stays denied);
- **outbound consent** (``projections.consent``): a web request that would run at once
  asks when its host is not allowed in the chat (named by the user, approved by a
  person for the chat, or an exact URL the chat's ``web_search`` returned); one that a
  profile or the user's settings set to ``auto`` explicitly asks only for a private or
  local address the user did not name. ``NAVI_TOOL_APPROVAL=auto`` (test rigs) turns
  this off too;
- **what a person approved for the session**: a call that would ask runs when its
  *scope* was approved "for this session" (``tool.approval_decided`` with scope
  ``session`` and that ``scope_key``; in older logs, one without a key: the whole tool).

A call's scope is what the card's "for this session" button names: the tool's kind of
action and target (``filesystem:write:<folder>``), a host for web reads
(``host:example.com``), a host and method for other requests
(``http:POST:example.com``), any Python code (``code_exec``)… (``Tool.describe``). A
subagent's scopes hold for that subagent; the chat's hold for its subagents too.

The run records the outcome (navi/run/driver.py): ``tool.approval_requested`` with the
policy's ``source``, who asked in words and the card's description, then the decision,
or ``tool.failed(reason="denied")`` for a ``deny``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from events.types import ToolApprovalDecided, ToolCall
from profiles import Profile
from projections.consent import INITIAL as NO_CONSENT
from projections.consent import Consent, is_private_host, url_host, url_key
from tools import ToolRegistry
from tools.base import APPROVALS, Approval, CallDescription, Reach, default_description

FLOOR = "the operator (NAVI_TOOL_APPROVAL=ask)"


class Scope(msgspec.Struct, frozen=True):
    """What approving a call "for this session" covers: ``key`` (recorded) and ``label``
    (the button: "Allow file writes in this chat")."""

    key: str
    label: str


class Policy(msgspec.Struct, frozen=True):
    approval: Approval
    source: str  # which rule decided (``tool.approval_requested.policy``)
    asked_by: str = ""  # who asks, in words a person understands (the card)
    scope: Scope | None = None  # None: the call can only be approved once


@dataclass(frozen=True)
class Allowances:
    """What a stream's chat allows: its own consent fold, its top-level session's (the
    same for a top-level session), and the tools older logs approved as a whole."""

    own: Consent = NO_CONSENT
    chat: Consent = NO_CONSENT
    whole_tools: frozenset[str] = frozenset()

    def scoped(self, key: str) -> bool:
        return key in self.own.scopes or key in self.chat.scopes

    def host_allowed(self, host: str) -> bool:
        """Named by the user in the chat, or approved for the chat by a person (a read
        scope, or any method's scope: a host trusted with a POST may be read)."""
        if host in self.chat.named or self.scoped(f"host:{host}"):
            return True
        return any(
            key.startswith("http:") and key.split(":", 2)[-1] == host
            for key in (*self.own.scopes, *self.chat.scopes)
        )

    def found(self, url: str) -> bool:
        key = url_key(url)
        return key is not None and (key in self.own.found or key in self.chat.found)


def policy_for(
    call: ToolCall,
    *,
    tools: ToolRegistry,
    profile: Profile,
    operator: str,
    user: Mapping[str, str],
    allowances: Allowances = Allowances(),
    description: CallDescription | None = None,
    subagent: bool = False,
) -> Policy:
    """The policy of ``call`` (see the module doc for the order of the rules)."""
    name = call.name
    described = description or default_description(name)
    explicit = True
    if name in profile.tool_policy:
        approval: Approval = profile.tool_policy[name]
        source, asked_by = f"profile {profile.id}", f"profile {profile.name}"
    elif user.get(name) in APPROVALS:
        approval, source, asked_by = user[name], "your settings", "your settings"  # type: ignore[assignment]
    elif operator in ("auto", "ask"):
        approval, explicit = operator, False  # type: ignore[assignment]
        source, asked_by = "NAVI_TOOL_APPROVAL", f"the operator (NAVI_TOOL_APPROVAL={operator})"
    else:
        approval, explicit = tools.approval_for(name, call.arguments), False
        source, asked_by = f"{name}'s default", described.default_asker or f"{name}'s default"
    if operator == "ask" and approval == "auto":
        approval, source, asked_by = "ask", "NAVI_TOOL_APPROVAL", FLOOR
    if approval == "deny":
        return Policy("deny", source, asked_by)
    scope = session_scope(described, subagent=subagent)
    if approval == "auto" and operator != "auto" and described.reach:
        why = outbound_question(described.reach, allowances, explicit=explicit)
        if why is not None:
            approval, source, asked_by = "ask", "outbound consent", why
    if approval == "ask" and (
        name in allowances.whole_tools or (scope is not None and allowances.scoped(scope.key))
    ):
        return Policy("auto", "approved for this session", asked_by, scope)
    return Policy(approval, source, asked_by, scope)


def session_scope(described: CallDescription, *, subagent: bool) -> Scope | None:
    """What "for this session" covers for a call so described: for web reads their one
    host, for other requests the host and method (unless the tool names a scope of its
    own), else the tool's own scope; None when no one scope fits (several hosts)."""
    where = "for this subagent" if subagent else "in this chat"
    own = described.scope
    reach = described.reach
    if reach:
        hosts = {url_host(r.url) for r in reach}
        host = hosts.pop() if len(hosts) == 1 else None
        if all(r.reads for r in reach):
            if host is None:
                return None
            return Scope(f"host:{host}", f"Allow requests to {host} {where}")
        if own is None:
            methods = {r.method.upper() for r in reach}
            if host is None or len(methods) != 1:
                return None
            method = methods.pop()
            return Scope(f"http:{method}:{host}", f"Allow {method} requests to {host} {where}")
    if own is None:
        return None
    return Scope(own.key, f"{own.allows} {where}")


def outbound_question(
    reach: tuple[Reach, ...], allowances: Allowances, *, explicit: bool
) -> str | None:
    """Why a request that would run at once asks instead (who asks, in words), or None.
    ``explicit``: a profile or the user's settings set the tool to ``auto`` — then only
    a private or local address the user did not name asks."""
    for request in reach:
        host = url_host(request.url)
        if host is None:
            return "Navi asks before a web request whose address it cannot read"
        if allowances.host_allowed(host):
            continue
        if is_private_host(host):
            return (
                f"Navi asks before reaching {host}, a private or local address you have "
                "not named in this chat"
            )
        if explicit or (request.reads and allowances.found(request.url)):
            continue
        return f"Navi asks before contacting {host}, a host not allowed in this chat yet"
    return None


class CallConsent:
    """What one call's web requests may reach as it runs (``tools.context.OutboundConsent``):
    private and local addresses only where the user allowed them, and a redirect only to
    a host the call could have gone to without asking."""

    def __init__(
        self,
        reach: tuple[Reach, ...],
        allowances: Allowances,
        *,
        explicit: bool,
        decision: ToolApprovalDecided | None,
    ) -> None:
        self.allowances = allowances
        self.explicit = explicit
        hosts = {url_host(r.url) for r in reach}
        self.hosts = frozenset(h for h in hosts if h is not None)
        # A private address is reached when the user named the host, approved it for the
        # chat, or approved this very call (they consented to its host, whatever address
        # it has); not behind a call that ran without asking (a public name that
        # resolves to a LAN address).
        approved = decision is not None and decision.approved
        self.private_ok = bool(self.hosts) and (
            approved or all(allowances.host_allowed(h) for h in self.hosts)
        )

    def refusal(self, url: str) -> str | None:
        host = url_host(url)
        if host is None or host in self.hosts:
            return None
        reads = (Reach(url),)
        if outbound_question(reads, self.allowances, explicit=self.explicit) is None:
            return None
        return (
            f"the request was redirected to {host}, which the user has not allowed in this "
            "chat; call the tool again with that URL if you need it (the user will be asked)"
        )


def explicit_auto(name: str, profile: Profile, user: Mapping[str, str]) -> bool:
    """Whether a profile or the user's settings set ``name`` to ``auto`` themselves."""
    if name in profile.tool_policy:
        return profile.tool_policy[name] == "auto"
    return user.get(name) == "auto"


def approval_report(operator: str) -> tuple[str, str]:
    """What ``navi serve`` logs at start-up and ``navi doctor`` prints: ("ok" | "warning",
    the sentence)."""
    if operator == "auto":
        return "warning", (
            "NAVI_TOOL_APPROVAL=auto: tools run WITHOUT asking anyone (code_exec, terminal, "
            "file writes, external tools, web requests to any host) unless a profile or a "
            "user's settings say ask; meant for scripts and test rigs"
        )
    if operator == "ask":
        return "ok", (
            "approvals: NAVI_TOOL_APPROVAL=ask is a floor: every tool call waits for a "
            "person (no profile or user setting makes one run at once; 'deny' stays denied), "
            "except what a person approved for a whole chat"
        )
    return "ok", (
        "approvals: code_exec, terminal, ssh_exec, file writes, memory_remember/forget, non-GET "
        "http_request, write_tool, reload_tools, external tools, entering a profile with a "
        "wider reach and web requests to a host not allowed in the chat ask first; profiles "
        "and users' settings may change a tool's rule"
    )


def denied_message(reason: str) -> str:
    """What the LLM reads when the user declined a call (as the user's words: never
    wrapped as tool output, navi/run/context_builder.py)."""
    said = reason.strip()
    return "The user declined this call" + (f": {said}" if said else ".")


POLICY_DENIED = "The approval policy does not allow this tool ({source})."
TIMED_OUT = "No one approved this call within {seconds:g} s, so it did not run."
