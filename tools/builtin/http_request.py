"""``http_request``: a generic HTTP client for APIs, with size and time limits."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from tools.base import (
    Approval,
    CallDescription,
    Reach,
    Tool,
    ToolError,
    ToolResult,
    cap_output,
    fail,
    ok,
    shorten,
)
from tools.context import ToolContext
from tools.fetch import Fetched, fetch, policy_for, shown_host

_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]
_SHOWN_HEADERS = ("content-type", "content-length", "location", "retry-after")


METHOD_OVERRIDES = frozenset({"x-http-method-override", "x-http-method", "x-method-override"})


class HttpRequestTool(Tool):
    name = "http_request"
    uses_files = False
    description = (
        "Send an HTTP request (GET, POST, PUT, PATCH, DELETE, HEAD) with optional headers and "
        "body, and return the status, main headers and response body. Use 'json' for a JSON "
        "body or 'body' for raw text."
    )
    parameters = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "minLength": 1},
            "method": {"type": "string", "enum": _METHODS, "description": "Default GET."},
            "headers": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": 'Request headers, e.g. {"Authorization": "Bearer ..."}.',
            },
            "body": {"type": "string", "description": "Raw request body."},
            "json": {"description": "A JSON value sent as the body (sets Content-Type)."},
            "timeout_s": {"type": "number", "minimum": 1, "description": "Default 20."},
            "follow_redirects": {"type": "boolean", "description": "Default true."},
        },
        "required": ["url"],
        "additionalProperties": False,
    }
    timeout_s = 120.0

    def is_idempotent(self, args: dict[str, Any]) -> bool:
        # A plain GET or HEAD reads. One with a body, or asking the server to take it for
        # another method (frameworks honour these headers), may change something.
        if str(args.get("method", "GET")).upper() not in ("GET", "HEAD"):
            return False
        if "body" in args or "json" in args:
            return False
        headers = args.get("headers")
        return not (
            isinstance(headers, dict) and METHOD_OVERRIDES & {str(k).lower() for k in headers}
        )

    def approval_for(self, args: dict[str, Any]) -> Approval:
        # Only a plain read runs without asking (and is run again on resume).
        return "auto" if self.is_idempotent(args) else "ask"

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        """The method and the URL's host; the run decides the scope by the host (a read
        may be allowed for the host, a change per host and method)."""
        url = str(args.get("url", ""))
        method = str(args.get("method", "GET")).upper()
        reads = self.is_idempotent(args)
        host = shown_host(url)
        sends = "" if reads else " with a body" if "body" in args or "json" in args else ""
        return CallDescription(
            summary=f"Send an HTTP {method} request{sends} to {shorten(url, 300)}",
            target=f"{method} {host}",
            risk=(
                f"sends a request to {host}: whatever the URL holds reaches that host"
                if reads
                else f"sends a {method} request to {host}, which may change something there"
            ),
            default_asker="Navi asks before HTTP requests that may change something",
            reach=(Reach(url, method, reads),),
        )

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        settings = ctx.settings
        method = str(args.get("method", "GET")).upper()
        headers = dict(args.get("headers") or {})
        if "body" in args and "json" in args:
            raise ToolError("give either 'body' or 'json', not both")
        content: bytes | None = None
        if "json" in args:
            content = json.dumps(args["json"]).encode()
            if not any(k.lower() == "content-type" for k in headers):
                headers["Content-Type"] = "application/json"
        elif "body" in args:
            content = str(args["body"]).encode()
        timeout = min(float(args.get("timeout_s") or settings.http_timeout_s), self.timeout_s - 5)
        response = await fetch(
            args["url"],
            policy=policy_for(ctx),
            consent=ctx.outbound,
            method=method,
            headers=headers,
            content=content,
            timeout_s=timeout,
            max_bytes=settings.http_max_bytes,
            follow_redirects=bool(args.get("follow_redirects", True)),
        )
        text = _describe(response, method, settings.output_max_chars)
        if response.status >= 400:
            return fail(f"HTTP {response.status} {response.reason}", text)
        return ok(text, status=response.status)


def _describe(response: Fetched, method: str, limit: int) -> str:
    lines = [f"HTTP {response.status} {response.reason}", f"URL: {response.url}"]
    lines += [
        f"{name}: {response.headers[name]}" for name in _SHOWN_HEADERS if name in response.headers
    ]
    if method == "HEAD" or not response.body:
        return "\n".join([*lines, "", "(empty body)"])
    kind = response.content_type
    textual = (
        kind.startswith("text/")
        or kind.endswith(("json", "xml", "javascript", "x-www-form-urlencoded"))
        or b"\x00" not in response.body[:1024]
    )
    if not textual:
        body = f"[binary body: {len(response.body)} bytes of {kind or 'unknown type'}]"
    else:
        body = response.text()
        if kind == "application/json" or kind.endswith("+json"):
            with contextlib.suppress(ValueError):
                body = json.dumps(json.loads(body), indent=2, ensure_ascii=False)
        body = cap_output(body, limit)
    if response.truncated:
        body += "\n[... body truncated: larger than the size limit]"
    return "\n".join([*lines, "", body])
