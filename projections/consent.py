"""Where a chat's outbound requests may go without asking: a pure fold of one stream.

Navi asks before a web request (``http_request``, ``web_view``, ``image_view``, an MCP
tool with ``openWorldHint``) goes to a host the user has not allowed in the chat
(navi/run/approval.py; the rule and its threats: docs/approvals.md). What allows one:

- ``named``: hosts the user named in their own messages — a URL, a bare name
  (``example.com``, ``nas.local:5000``), an IPv4 address, ``localhost``. Exact hosts:
  ``example.com`` is not ``www.example.com``, and a port other than 80 and 443 is part
  of the host (``127.0.0.1:8001`` is not ``127.0.0.1:9000``). In a subagent's stream the
  "user message" is the task its parent's LLM wrote: it names nothing.
- ``found``: the exact URLs a ``web_search`` of the chat returned (its ``urls``
  metadata): each may be read as it is, never its host as a whole — a search the LLM
  ran may return a page an attacker placed, and the host of such a page must not
  become a place to send data to.
- ``scopes``: the session scopes a person approved (``tool.approval_decided`` with
  scope ``session`` and a ``scope_key``), never one an import brought.

Hosts are compared as httpx reads a URL (what a request really connects to).
"""

from __future__ import annotations

import ipaddress
import re

import httpx
import msgspec
from msgspec.structs import replace

from events.types import Event, SessionCreated, ToolApprovalDecided, ToolCompleted, UserMessage


class Consent(msgspec.Struct, frozen=True):
    subagent: bool = False
    named: frozenset[str] = frozenset()
    found: frozenset[str] = frozenset()
    scopes: frozenset[str] = frozenset()


INITIAL = Consent()
TYPES = frozenset({SessionCreated, UserMessage, ToolCompleted, ToolApprovalDecided})

_URL = re.compile(r"""https?://[^\s<>"'`\]\[(){}|\\^]+""", re.IGNORECASE)
# A bare host: a dotted name whose last label has a letter first, an IPv4 address, or
# localhost; an optional port. Not inside a longer name, a URL or an e-mail address.
_BARE = re.compile(
    r"(?<![\w@.:/-])"
    r"((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}"
    r"|\d{1,3}(?:\.\d{1,3}){3}|localhost)"
    r"(?::(\d{1,5}))?(?![\w-]|\.\w)",
    re.IGNORECASE,
)
# Names that only a local network resolves.
_LOCAL_SUFFIXES = (".local", ".lan", ".home", ".internal", ".intranet", ".corp", ".home.arpa")


def evolve(consent: Consent, event: Event) -> Consent:
    if isinstance(event, SessionCreated):
        return replace(consent, subagent=event.parent_stream_id is not None)
    if isinstance(event, UserMessage):
        if consent.subagent:
            return consent
        named = hosts_in_text(event.text)
        return replace(consent, named=consent.named | named) if named else consent
    if isinstance(event, ToolCompleted):
        if event.name != "web_search" or not event.success:
            return consent
        urls = event.metadata.get("urls")
        if not isinstance(urls, list):
            return consent
        found = {key for url in urls if isinstance(url, str) and (key := url_key(url))}
        return replace(consent, found=consent.found | found) if found else consent
    if isinstance(event, ToolApprovalDecided) and _approves_scope(event):
        return replace(consent, scopes=consent.scopes | {event.scope_key})
    return consent


def _approves_scope(event: ToolApprovalDecided) -> bool:
    # An imported decision approves nothing here (a person of another Navi, or nobody).
    return (
        event.approved and event.scope == "session" and bool(event.scope_key) and not event.imported
    )


def host_key(host: str, port: int | None) -> str:
    """A host as Navi compares it: lower case, ASCII (IDNA), no trailing dot, and a port
    unless it is 80 or 443 (``[…]`` around an IPv6 address with a port)."""
    name = host.lower().rstrip(".")
    if port is None or port in (80, 443):
        return name
    return f"[{name}]:{port}" if ":" in name else f"{name}:{port}"


def _parse(url: str) -> httpx.URL | None:
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError, ValueError):
        return None
    if parsed.scheme not in ("http", "https") or not parsed.raw_host:
        return None
    return parsed


def url_host(url: str) -> str | None:
    """The host key of the host ``url`` connects to; None if it is not an http(s) URL
    with a host."""
    parsed = _parse(url)
    if parsed is None:
        return None
    return host_key(parsed.raw_host.decode("ascii", "replace"), parsed.port)


def url_key(url: str) -> str | None:
    """``url`` as compared with a search result: scheme, user info, host key, path and
    query as httpx sends them; the fragment (never sent) left out."""
    parsed = _parse(url)
    if parsed is None:
        return None
    host = host_key(parsed.raw_host.decode("ascii", "replace"), parsed.port)
    userinfo = parsed.userinfo.decode("ascii", "replace")
    user = f"{userinfo}@" if userinfo else ""
    return f"{parsed.scheme}://{user}{host}{parsed.raw_path.decode('ascii', 'replace')}"


def hosts_in_text(text: str) -> frozenset[str]:
    """The hosts a person named in ``text``: those of its URLs, and bare ones."""
    found: set[str] = set()
    for match in _URL.finditer(text):
        key = url_host(match.group(0).rstrip(".,;:!?"))
        if key:
            found.add(key)
    for match in _BARE.finditer(text):
        port = int(match.group(2)) if match.group(2) else None
        if port is not None and not 0 < port < 65536:
            continue
        found.add(host_key(match.group(1), port))
    return frozenset(found)


def is_private_host(key: str) -> bool:
    """Whether a host key names this machine or a private network: a loopback, private,
    shared (CGNAT), link-local, reserved or multicast address, ``localhost``, a local-only
    name (``.local``, ``.lan``…, a name without a dot), or a name no public DNS serves (a
    last label that is not a word: ``0x7f.1``, ``2130706433`` reach loopback on some
    resolvers). A public name that resolves to such an address is caught when the request
    connects (navi/run/tool_step.py)."""
    host = key
    if host.startswith("["):
        host = host[1 : host.index("]")] if "]" in host else host[1:]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        last = host.rsplit(".", 1)[-1]
        return (
            "." not in host
            or host == "localhost"
            or host.endswith((".localhost", *_LOCAL_SUFFIXES))
            or not (last[:1].isalpha() and all(c.isalnum() or c == "-" for c in last))
        )
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast
