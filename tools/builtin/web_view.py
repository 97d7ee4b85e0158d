"""``web_view``: fetch a page and give back its readable text."""

from __future__ import annotations

import json
from typing import Any

import anyio

from tools.base import CallDescription, Reach, Tool, ToolError, ToolResult, cap_output, ok, shorten
from tools.context import ToolContext
from tools.fetch import fetch, policy_for, shown_host

_TEXT_TYPES = ("text/plain", "text/markdown", "text/csv", "application/xml", "text/xml")


class WebViewTool(Tool):
    name = "web_view"
    uses_files = False
    description = (
        "Open a web page (http/https URL) and return its readable text: the main content's "
        "headings, paragraphs, lists, tables and links, without menus, banners, footers or "
        "hidden text. Use it to read a page found with web_search."
    )
    parameters = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "minLength": 1, "description": "The page's URL."},
            "max_chars": {
                "type": "integer",
                "minimum": 200,
                "description": "Return at most this many characters (default 20000).",
            },
        },
        "required": ["url"],
        "additionalProperties": False,
    }
    idempotent = True
    timeout_s = 60.0
    requires = ("tools.builtin.page_text",)  # lxml, trafilatura, tinycss2, cssselect

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        url = str(args.get("url", ""))
        host = shown_host(url)
        return CallDescription(
            summary=f"Open the web page {shorten(url, 300)}",
            target=f"GET {host}",
            risk=f"fetches a page from {host}: whatever the URL holds reaches that host",
            default_asker="Navi asks before web_view runs",
            reach=(Reach(url),),
        )

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        from tools.builtin.page_text import decode_page, readable_text

        settings = ctx.settings
        page = await fetch(
            args["url"],
            policy=policy_for(ctx),
            consent=ctx.outbound,
            timeout_s=settings.http_timeout_s,
            max_bytes=settings.http_max_bytes,
        )
        if page.status >= 400:
            raise ToolError(f"HTTP {page.status} {page.reason} for {page.url}")
        kind = page.content_type
        if kind in ("text/html", "application/xhtml+xml") or (
            not kind and b"<html" in page.body[:2048].lower()
        ):
            # Parsing, the hidden-text filter and extraction take a big page a second of
            # CPU: off the event loop, which serves every other session meanwhile.
            html = decode_page(page.body, page.charset)
            text = await anyio.to_thread.run_sync(readable_text, html, page.url)
        elif kind == "application/json" or kind.endswith("+json"):
            text = _pretty_json(page.text())
        elif kind.startswith("text/") or kind in _TEXT_TYPES:
            text = page.text()
        else:
            raise ToolError(
                f"{page.url} is not a text page (content type {kind or 'unknown'}); "
                "use image_view for images or http_request for raw data"
            )
        limit = min(
            int(args.get("max_chars") or settings.web_view_max_chars), settings.output_max_chars
        )
        header = f"URL: {page.url}\n"
        if page.truncated:
            header += f"(page over {settings.http_max_bytes} bytes; only the start was read)\n"
        return ok(header + "\n" + cap_output(text or "(the page has no readable text)", limit))


def _pretty_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text
