"""One bounded HTTP exchange: a time limit for the whole of it and a cap on the body."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
import httpx

from tools.base import ToolError

USER_AGENT = "Navi/0.1 (personal assistant)"


@dataclass(frozen=True)
class Fetched:
    url: str
    status: int
    reason: str
    headers: httpx.Headers
    body: bytes
    # The body went past the cap and the rest was not read.
    truncated: bool

    @property
    def content_type(self) -> str:
        value: str = self.headers.get("content-type", "")
        return value.split(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        value: str = self.headers.get("content-type", "")
        for part in value.split(";")[1:]:
            key, _, value = part.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                return value.strip().strip('"')
        return None

    def text(self) -> str:
        encoding = self.charset or "utf-8"
        try:
            return self.body.decode(encoding, errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")


def check_url(url: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise ToolError(f"only http:// and https:// URLs are supported, got {url!r}")
    if not parts.hostname:
        raise ToolError(f"URL has no host: {url!r}")
    return url.strip()


async def fetch(
    url: str,
    *,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
    timeout_s: float,
    max_bytes: int,
    follow_redirects: bool = True,
) -> Fetched:
    """Send one request and read at most ``max_bytes`` of the body, all within ``timeout_s``."""
    url = check_url(url)
    request_headers = {"User-Agent": USER_AGENT, **(headers or {})}
    try:
        with anyio.fail_after(timeout_s):
            async with (
                httpx.AsyncClient(
                    follow_redirects=follow_redirects, max_redirects=5, timeout=timeout_s
                ) as client,
                client.stream(method, url, headers=request_headers, content=content) as response,
            ):
                body = bytearray()
                truncated = False
                async for chunk in response.aiter_bytes():
                    room = max_bytes - len(body)
                    if len(chunk) > room:
                        body += chunk[:room]
                        truncated = True
                        break
                    body += chunk
                return Fetched(
                    url=str(response.url),
                    status=response.status_code,
                    reason=response.reason_phrase,
                    headers=response.headers,
                    body=bytes(body),
                    truncated=truncated,
                )
    except TimeoutError:
        raise ToolError(f"request to {url} timed out after {timeout_s:g}s") from None
    except httpx.TooManyRedirects:
        raise ToolError(f"too many redirects from {url}") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"request to {url} failed: {type(exc).__name__}: {exc}") from None
