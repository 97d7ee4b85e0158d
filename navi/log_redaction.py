"""Secrets out of log lines: query-string values and URL passwords.

A browser's WebSocket carries its ticket in the URL (``?ticket=…``), a client may put a
token in one (``?token=…``), and a library logs the URLs it requests (httpx: "HTTP
Request: GET https://…?key=…"). Every log line, Navi's own and every library's, passes
through :func:`redact_event`, which replaces each query value by ``[redacted]`` (the
names stay, so a line still says what was asked) and a URL's password likewise. The
values of Navi's own harmless parameters (``after``, ``at``, …) are kept: they are what
one reads a log for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from typing import Any

REDACTED = "[redacted]"

# Query parameters of Navi's own routes whose values are positions and switches, never
# secrets or user text. Anything else (``ticket``, ``token``, ``q``, …) is redacted.
SAFE_PARAMETERS = frozenset({"after", "at", "as_new", "speed", "sub_after"})

# A URL or an absolute path (as an access log shows it), then ``?`` and its query.
_WITH_QUERY = re.compile(
    r"(?P<base>(?:\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>?#]*)|(?:/[^\s\"'<>?#]*))"
    r"\?(?P<query>[^\s\"'<>#]+)"
)
# ``scheme://user:password@`` → the password goes.
_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/@:\"'<>]*):[^\s/@\"'<>]+@")


def _redact_query(query: str) -> str:
    parts = []
    for part in query.split("&"):
        name, sep, _value = part.partition("=")
        if not sep:
            parts.append(REDACTED if part else part)
        elif name in SAFE_PARAMETERS:
            parts.append(part)
        else:
            parts.append(f"{name}={REDACTED}")
    return "&".join(parts)


# Values known to be secrets (what an mcp.json ``${VAR}`` took from the environment,
# navi/mcp/variables.py) → what is shown instead (``${VAR}``), in every log line and
# every error redact_text passes, whatever wrote it (httpx logging a URL, say).
_KNOWN: dict[str, str] = {}
# Its keys, longest first (a value inside another is replaced after it).
_ORDER: list[str] = []


def hide_values(known: Mapping[str, str]) -> None:
    """From now on, show each key of ``known`` as its value (process-wide)."""
    _KNOWN.update(known)
    _ORDER[:] = sorted(_KNOWN, key=len, reverse=True)


def redact_text(text: str) -> str:
    """``text`` with every query value (but Navi's harmless ones), URL password and
    known secret value (:func:`hide_values`) redacted."""
    for value in _ORDER:
        if value in text:
            text = text.replace(value, _KNOWN[value])
    if "?" in text:
        text = _WITH_QUERY.sub(lambda m: f"{m['base']}?{_redact_query(m['query'])}", text)
    if "@" in text:
        text = _PASSWORD.sub(lambda m: f"{m['head']}:{REDACTED}@", text)
    return text


def redact_event(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: :func:`redact_text` on every string value of the event."""
    for key, value in event_dict.items():
        if isinstance(value, str) and ("?" in value or "@" in value or _KNOWN):
            event_dict[key] = redact_text(value)
    return event_dict
