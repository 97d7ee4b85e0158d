"""``web_search``: DuckDuckGo through ``ddgs``, or a SearXNG instance when SEARXNG_URL is set."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode

import anyio.to_thread

from tools.base import Tool, ToolError, ToolResult, ok
from tools.context import ToolContext
from tools.fetch import fetch
from tools.outbound import OutboundPolicy


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str


class SearchBackend(Protocol):
    async def search(self, query: str, max_results: int, ctx: ToolContext) -> list[SearchHit]: ...


class SearxngBackend:
    """A SearXNG instance's JSON API (``format=json`` must be enabled in its settings)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    async def search(self, query: str, max_results: int, ctx: ToolContext) -> list[SearchHit]:
        url = f"{self.base_url}/search?" + urlencode({"q": query, "format": "json"})
        # The operator named this instance (often on this machine or the LAN), so its
        # address is trusted as configured; link-local, metadata and Navi's own port
        # stay refused, for it and for any redirect it sends.
        policy = OutboundPolicy(
            allow_private=True, allow_loopback=True, navi_port=ctx.settings.navi_port
        )
        response = await fetch(
            url,
            policy=policy,
            timeout_s=ctx.settings.http_timeout_s,
            max_bytes=ctx.settings.http_max_bytes,
        )
        if response.status >= 400:
            hint = (
                " (is format=json enabled in its settings.yml?)" if response.status == 403 else ""
            )
            raise ToolError(f"SearXNG answered HTTP {response.status}{hint}")
        try:
            data = json.loads(response.text())
        except ValueError:
            raise ToolError("SearXNG did not answer with JSON") from None
        results = data.get("results", []) if isinstance(data, dict) else []
        return [
            SearchHit(
                title=str(item.get("title", "")),
                url=str(item.get("url", "")),
                snippet=str(item.get("content", "") or ""),
            )
            for item in results[:max_results]
            if isinstance(item, dict)
        ]


class DdgsBackend:
    """DuckDuckGo (and friends) through the ``ddgs`` package; it is sync, so run in a thread."""

    async def search(self, query: str, max_results: int, ctx: ToolContext) -> list[SearchHit]:
        from ddgs import DDGS

        def run() -> list[dict[str, Any]]:
            timeout = int(ctx.settings.http_timeout_s)
            return list(DDGS(timeout=timeout).text(query, max_results=max_results) or [])

        try:
            rows = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        except Exception as exc:
            raise ToolError(f"web search failed: {type(exc).__name__}: {exc}") from None
        return [
            SearchHit(
                title=str(row.get("title", "")),
                url=str(row.get("href", row.get("url", ""))),
                snippet=str(row.get("body", "")),
            )
            for row in rows[:max_results]
        ]


def format_hits(query: str, hits: list[SearchHit]) -> str:
    if not hits:
        return f"No results for {query!r}."
    lines = [f"Results for {query!r}:"]
    for index, hit in enumerate(hits, 1):
        lines.append(f"{index}. {hit.title or '(untitled)'}\n   {hit.url}")
        if hit.snippet:
            lines.append(f"   {' '.join(hit.snippet.split())}")
    return "\n".join(lines)


class WebSearchTool(Tool):
    name = "web_search"
    uses_files = False
    description = (
        "Search the web and return a numbered list of results (title, URL, snippet). "
        "Open a result with web_view to read it."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "What to search for."},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": 20,
                "description": "How many results (default 5).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    idempotent = True
    timeout_s = 60.0

    def __init__(self, backend: SearchBackend | None = None) -> None:
        # None: decided per call from ctx.settings (SearXNG when SEARXNG_URL is set).
        self._backend = backend

    def backend_for(self, ctx: ToolContext) -> SearchBackend:
        if self._backend is not None:
            return self._backend
        if ctx.settings.searxng_url:
            return SearxngBackend(ctx.settings.searxng_url)
        return DdgsBackend()

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = args["query"].strip()
        if not query:
            raise ToolError("the query is empty")
        count = int(args.get("max_results", 5))
        hits = await self.backend_for(ctx).search(query, count, ctx)
        # The results' URLs, apart from their titles and snippets (page text): the user
        # may read exactly these without being asked (docs/approvals.md).
        return ok(format_hits(query, hits), urls=[hit.url for hit in hits if hit.url])
