from __future__ import annotations

import codecs
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.support.local_servers import LocalHTTPServer
from tools import InMemoryToolState, ToolContext, ToolError, ToolRegistry, ToolSettings
from tools.builtin.page_text import decode_page, readable_text
from tools.builtin.web_search import SearchHit, WebSearchTool

pytestmark = pytest.mark.anyio


@pytest.fixture
def ctx(files_dir: Path, settings: ToolSettings, state: InMemoryToolState) -> ToolContext:
    """The local test server is on 127.0.0.1: these tests open loopback as an operator
    would, with NAVI_ALLOW_PRIVATE_URLS (tests/security/test_outbound.py checks that
    it is refused without)."""
    opened = msgspec.structs.replace(settings, allow_private_urls=True)
    return ToolContext.standalone("s1", files_dir, settings=opened, state=state)


def tuned(ctx: ToolContext, **changes: Any) -> ToolContext:
    settings = msgspec.structs.replace(ctx.settings, **changes)
    return ToolContext.standalone(ctx.session_id, ctx.files_dir, settings=settings)


# ---------------------------------------------------------------- web_view


async def test_web_view_turns_a_page_into_readable_text(
    registry: ToolRegistry, ctx: ToolContext, http_server: LocalHTTPServer
) -> None:
    url = http_server.url("/page.html")
    result = await registry.execute("web_view", {"url": url}, ctx)
    assert result.success
    data_url = http_server.url("/data.json")
    assert result.output == (
        f"URL: {url}\n\nTitle: Navi test page\n\n# Main heading\n\n"
        f"First   paragraph with\n   **bold** text and a [data link]({data_url}).\n\n"
        "- item one\n- item two\n\n## Second heading\n\nCafé & crème"
    )
    for dropped in ("do not show", "color: red", "About us", "footer text"):
        assert dropped not in result.output


async def test_web_view_follows_redirects_and_shows_json_and_text(
    registry: ToolRegistry, ctx: ToolContext, http_server: LocalHTTPServer
) -> None:
    redirected = await registry.execute("web_view", {"url": http_server.url("/redirect")}, ctx)
    assert redirected.output.startswith(f"URL: {http_server.url('/page.html')}\n")
    data = await registry.execute("web_view", {"url": http_server.url("/data.json")}, ctx)
    assert '"name": "navi"' in data.output
    plain = await registry.execute("web_view", {"url": http_server.url("/plain.txt")}, ctx)
    assert plain.output.endswith("just text\n")


async def test_web_view_errors(
    registry: ToolRegistry, ctx: ToolContext, http_server: LocalHTTPServer
) -> None:
    missing = await registry.execute("web_view", {"url": http_server.url("/status/404")}, ctx)
    assert missing.error == f"HTTP 404 Not Found for {http_server.url('/status/404')}"
    binary = await registry.execute("web_view", {"url": http_server.url("/binary")}, ctx)
    assert "is not a text page (content type application/octet-stream)" in (binary.error or "")
    scheme = await registry.execute("web_view", {"url": "file:///etc/passwd"}, ctx)
    assert scheme.error == "only http:// and https:// URLs are supported, got 'file:///etc/passwd'"
    loop = await registry.execute("web_view", {"url": http_server.url("/loop")}, ctx)
    assert "too many redirects" in (loop.error or "")
    refused = await registry.execute("web_view", {"url": "http://127.0.0.1:1/"}, ctx)
    assert "failed: ConnectError" in (refused.error or "")


async def test_web_view_size_and_time_limits(
    registry: ToolRegistry, ctx: ToolContext, http_server: LocalHTTPServer
) -> None:
    small = tuned(ctx, http_max_bytes=1000, http_timeout_s=0.5)
    big = await registry.execute("web_view", {"url": http_server.url("/big?bytes=50000")}, small)
    assert big.success
    assert "(page over 1000 bytes; only the start was read)" in big.output
    assert big.output.count("x") == 1000
    capped = await registry.execute(
        "web_view", {"url": http_server.url("/big?bytes=5000"), "max_chars": 300}, ctx
    )
    assert "[... output truncated: 4700 more characters]" in capped.output
    slow = await registry.execute("web_view", {"url": http_server.url("/slow?s=5")}, small)
    assert "timed out after 0.5s" in (slow.error or "")


def test_readable_text_details() -> None:
    html = (
        "<html><body><article><h3>T</h3><table><tr><td>a</td><td>b</td></tr></table>"
        "<p>See <a href='/x'>rel</a> here.</p></article></body></html>"
    )
    assert (
        readable_text(html, "http://h/dir/") == "### T\n\n| a | b | \n\nSee [rel](http://h/x) here."
    )
    assert readable_text("<p>a<br>b</p>", "http://h/") == "a\n\nb"
    assert readable_text("", "http://h/") == ""


# ---------------------------------------------------------------- http_request


async def test_http_request_methods_headers_and_bodies(
    registry: ToolRegistry, ctx: ToolContext, http_server: LocalHTTPServer
) -> None:
    url = http_server.url("/echo")
    got = await registry.execute("http_request", {"url": url, "headers": {"X-Test": "1"}}, ctx)
    assert got.success and got.output.startswith("HTTP 200 OK\n")
    assert '"method": "GET"' in got.output and '"X-Test": "1"' in got.output
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        result = await registry.execute(
            "http_request", {"url": url, "method": method, "body": f"raw {method}"}, ctx
        )
        assert result.success
        assert f'"method": "{method}"' in result.output
        assert f'"body": "raw {method}"' in result.output
    sent = await registry.execute(
        "http_request", {"url": url, "method": "POST", "json": {"a": [1, 2]}}, ctx
    )
    echoed = json.loads(sent.output.split("\n\n", 1)[1])
    assert echoed["body"] == '{"a": [1, 2]}'
    assert echoed["headers"]["Content-Type"] == "application/json"
    head = await registry.execute("http_request", {"url": url, "method": "HEAD"}, ctx)
    assert head.output.endswith("(empty body)")


async def test_http_request_errors_and_limits(
    registry: ToolRegistry, ctx: ToolContext, http_server: LocalHTTPServer
) -> None:
    not_found = await registry.execute("http_request", {"url": http_server.url("/status/500")}, ctx)
    assert not not_found.success
    assert not_found.error == "HTTP 500 Internal Server Error"
    assert "status 500" in not_found.output
    both = await registry.execute(
        "http_request", {"url": http_server.url("/echo"), "body": "a", "json": 1}, ctx
    )
    assert both.error == "give either 'body' or 'json', not both"
    bad_method = await registry.execute(
        "http_request", {"url": http_server.url("/echo"), "method": "TRACE"}, ctx
    )
    assert "is not one of" in (bad_method.error or "")
    small = tuned(ctx, http_max_bytes=100)
    big = await registry.execute("http_request", {"url": http_server.url("/big")}, small)
    assert big.output.endswith("x" * 100 + "\n[... body truncated: larger than the size limit]")
    binary = await registry.execute("http_request", {"url": http_server.url("/binary")}, ctx)
    assert "[binary body: 1024 bytes of application/octet-stream]" in binary.output
    slow = await registry.execute(
        "http_request", {"url": http_server.url("/slow?s=5"), "timeout_s": 1}, ctx
    )
    assert "timed out after 1s" in (slow.error or "")
    no_redirect = await registry.execute(
        "http_request", {"url": http_server.url("/redirect"), "follow_redirects": False}, ctx
    )
    assert no_redirect.output.startswith("HTTP 302 Found")
    assert "location: /page.html" in no_redirect.output


# ---------------------------------------------------------------- web_search


async def test_web_search_through_searxng(
    registry: ToolRegistry, ctx: ToolContext, http_server: LocalHTTPServer
) -> None:
    searx = tuned(ctx, searxng_url=http_server.url("/"))
    result = await registry.execute("web_search", {"query": "navi agent", "max_results": 2}, searx)
    assert result.success
    assert result.output == (
        "Results for 'navi agent':\n"
        "1. Result 1 for navi agent\n   https://example.org/1\n   Snippet number 1\n"
        "2. Result 2 for navi agent\n   https://example.org/2\n   Snippet number 2"
    )
    assert http_server.requests[-1].path.startswith("/search?q=navi+agent&format=json")


async def test_web_search_empty_and_failing_instance(
    registry: ToolRegistry, ctx: ToolContext, http_server: LocalHTTPServer
) -> None:
    http_server.search_results.append({"title": "only", "url": "u", "content": None})
    searx = tuned(ctx, searxng_url=http_server.url("/"))
    one = await registry.execute("web_search", {"query": "x"}, searx)
    assert one.output == "Results for 'x':\n1. only\n   u"
    broken = tuned(ctx, searxng_url=http_server.url("/not-searxng"))
    failed = await registry.execute("web_search", {"query": "x"}, broken)
    assert not failed.success
    assert "SearXNG answered HTTP 404" in (failed.error or "")
    too_many = await registry.execute("web_search", {"query": "x", "max_results": 50}, searx)
    assert "must be <= 20" in (too_many.error or "")


async def test_web_search_defaults_to_ddgs_and_formats_hits(ctx: ToolContext) -> None:
    tool = WebSearchTool()
    assert type(tool.backend_for(ctx)).__name__ == "DdgsBackend"

    class Fixed:
        async def search(self, query: str, max_results: int, ctx: ToolContext) -> list[SearchHit]:
            return [SearchHit("T", "https://t", "s")][:max_results]

    result = await WebSearchTool(Fixed()).call({"query": "q"}, ctx)
    assert result.output == "Results for 'q':\n1. T\n   https://t\n   s"
    none = await WebSearchTool(Fixed()).call({"query": "q", "max_results": 0}, ctx)
    assert none.output == "No results for 'q'."
    with pytest.raises(ToolError, match="the query is empty"):
        await WebSearchTool(Fixed()).call({"query": "  "}, ctx)
    assert none.output == "No results for 'q'."


# ---------------------------------------------------------------- readable text


PAGES = Path(__file__).parent / "pages"


def test_the_article_without_the_page_around_it() -> None:
    """The sample blog post (menu, cookie banner, share links, related posts, sidebar,
    footer): the article alone is 964 characters as text; our old parser kept 1,669,
    trafilatura keeps 918 (the article but its 46-character byline) plus the title."""
    text = readable_text((PAGES / "blog_post.html").read_text(), "https://crumb.example/b/1")
    for kept in (
        "# Sourdough at altitude",
        "Air pressure is lower at altitude",
        "## Bake hotter, then cover",
        "then finish uncovered.",
    ):
        assert kept in text
    for dropped in (
        "We use cookies",
        "Baking guides",
        "Share this post",
        "You might also like",
        "Get one new recipe",
        "All rights reserved",
        "affiliate programmes",
        "dataLayer",
    ):
        assert dropped not in text
    assert 900 < len(text) < 1100


def test_hidden_text_is_dropped() -> None:
    html = (
        "<html><body><main><h1>Visible</h1><p>Seen paragraph one.</p>"
        '<p style="display:none">h1</p><p style="DISPLAY : NONE !important">h2</p>'
        '<div hidden><p>h3</p></div><span aria-hidden="true">h4</span>'
        '<p style="visibility: hidden">h5</p><p class="note sr-only">h6</p>'
        '<p class="d-none">h7</p><template><p>h8</p></template>'
        '<p style="color: grey">Seen paragraph <b hidden>h9</b>two.</p></main></body></html>'
    )
    text = readable_text(html, "http://h/")
    assert "Seen paragraph one." in text and "Seen paragraph two." in text
    assert not [f"h{i}" for i in range(1, 10) if f"h{i}" in text.replace("# V", "")]


def test_the_pages_charset_is_honoured() -> None:
    page = "<html><head><meta charset='windows-1251'></head><body><p>Привет, мир</p></body>"
    body = page.encode("cp1251")
    assert "Привет, мир" in decode_page(body, None)  # <meta charset>
    assert "Привет, мир" in decode_page("<p>Привет, мир</p>".encode("koi8-r"), "koi8-r")
    # The header wins over <meta>; a BOM wins over both.
    assert "Привет" in decode_page(page.replace("windows-1251", "utf-8").encode("cp1251"), "cp1251")
    assert decode_page(codecs.BOM_UTF8 + "é".encode(), "latin-1") == "é"
    # http-equiv, and latin-1 read as browsers read it (windows-1252: "€" is 0x80).
    equiv = b'<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">\x80'
    assert decode_page(equiv, None).endswith("€")
    # Nothing declared: UTF-8 if it is, else windows-1252; an unknown label is skipped.
    assert decode_page("café".encode(), None) == "café"
    assert decode_page("café".encode("cp1252"), "no-such-charset") == "café"


async def test_web_view_reads_a_page_in_its_own_charset(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    page = (
        "<html><head><meta charset='iso-8859-15'><title>Prix</title></head>"
        "<body><main><p>Le menu du jour coûte 12 € au café, boisson comprise.</p></main></body>"
        "</html>"
    ).encode("iso-8859-15")

    class Latin(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")  # no charset: <meta> says it
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Latin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        result = await registry.execute("web_view", {"url": url}, ctx)
    finally:
        server.shutdown()
        server.server_close()
    assert "coûte 12 € au café" in result.output
