"""One bounded HTTP exchange for tools: checked addresses, a time limit for the whole of
it, a cap on the body, and redirects followed hop by hop.

Every connection goes through :class:`tools.outbound.CheckedNetworkBackend` (resolve once,
check, connect to the checked address), and every redirect hop makes a new connection
there, so a redirect to a refused address is refused at that hop. The environment's
proxy settings are ignored: a proxy would make the proxy the only address checked.
"""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
import httpcore
import httpx
import structlog

from tools.base import ToolError
from tools.context import OutboundConsent, ToolContext
from tools.outbound import CheckedNetworkBackend, OutboundPolicy, OutboundRefused

USER_AGENT = "Navi/0.1 (personal assistant)"
_NOT_NAMED = (
    "a private or local address is reached only when the user named its host in this "
    "chat or approved the call"
)
MAX_REDIRECTS = 5
_REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
# Credentials the LLM set for one site are not handed to the next site of a redirect.
_ORIGIN_BOUND_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})
_BODY_HEADERS = frozenset({"content-type", "content-length", "transfer-encoding"})

log = structlog.get_logger(__name__)


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


def policy_for(ctx: ToolContext) -> OutboundPolicy:
    """The outbound policy of a call: the operator's escape hatch opens loopback and
    private ranges, the profile's LAN grant private ranges only."""
    operator = ctx.settings.allow_private_urls
    # And only where the user allowed it: a host they named or approved (ctx.outbound).
    consented = ctx.outbound is None or ctx.outbound.private_ok
    return OutboundPolicy(
        allow_private=(operator or ctx.profile.allow_private_urls) and consented,
        allow_loopback=operator and consented,
        navi_port=ctx.settings.navi_port,
    )


def shown_host(url: str) -> str:
    """The host (and a port that is not the scheme's) a URL connects to, as httpx reads
    it (what a request goes to, not what a lenient parser guesses), for a person to read."""
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError):
        return f"{url!r} (not a valid URL: the call will fail)"
    host = parsed.host or "(no host)"
    return f"{host}:{parsed.port}" if parsed.port is not None else host


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
    policy: OutboundPolicy,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    content: bytes | None = None,
    timeout_s: float,
    max_bytes: int,
    follow_redirects: bool = True,
    consent: OutboundConsent | None = None,
) -> Fetched:
    """Send one request and read at most ``max_bytes`` of the body, all within ``timeout_s``.
    ``consent``: a redirect goes only where the user allowed (``refusal``)."""
    first = url = check_url(url)
    request_headers = {"User-Agent": USER_AGENT, **(headers or {})}
    transport = CheckedTransport(CheckedNetworkBackend(policy))
    try:
        with anyio.fail_after(timeout_s):
            async with httpx.AsyncClient(
                transport=transport, timeout=timeout_s, trust_env=False
            ) as client:
                for hop in range(MAX_REDIRECTS + 1):
                    request = client.build_request(
                        method, url, headers=request_headers, content=content
                    )
                    try:
                        response = await client.send(request, stream=True)
                    except OutboundRefused as exc:
                        log.info("tool_connection_refused", host=request.url.host, hop=hop)
                        if consent is not None and not consent.private_ok:
                            exc = OutboundRefused(f"{exc} ({_NOT_NAMED})")
                        if hop == 0:
                            raise exc from None
                        raise OutboundRefused(f"redirect to {_safe(url)} refused: {exc}") from None
                    try:
                        location = response.headers.get("location")
                        if not (
                            follow_redirects
                            and location
                            and response.status_code in _REDIRECT_CODES
                        ):
                            return await _read(response, max_bytes)
                    finally:
                        await response.aclose()
                    target = response.url.join(location)
                    url = check_url(str(target))
                    refused = consent.refusal(url) if consent is not None else None
                    if refused is not None:
                        raise ToolError(refused)
                    method, content, request_headers = _redirected(
                        response.status_code, method, content, request_headers, request.url, target
                    )
                raise ToolError(f"too many redirects from {first} (more than {MAX_REDIRECTS})")
    except TimeoutError:
        raise ToolError(f"request to {first} timed out after {timeout_s:g}s") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"request to {first} failed: {type(exc).__name__}: {exc}") from None


async def _read(response: httpx.Response, max_bytes: int) -> Fetched:
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


def _redirected(
    status: int,
    method: str,
    content: bytes | None,
    headers: dict[str, str],
    source: httpx.URL,
    target: httpx.URL,
) -> tuple[str, bytes | None, dict[str, str]]:
    """The next hop's request, as browsers make it: 303 (and 301/302 after a POST) turn
    into a GET without a body; credentials stay with their origin."""
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method, content = "GET", None
        headers = {k: v for k, v in headers.items() if k.lower() not in _BODY_HEADERS}
    same_origin = (source.scheme, source.host, source.port) == (
        target.scheme,
        target.host,
        target.port,
    )
    if not same_origin:
        headers = {k: v for k, v in headers.items() if k.lower() not in _ORIGIN_BOUND_HEADERS}
    return method, content, headers


def _safe(url: str) -> str:
    """A URL without its user:password part, fit for a message."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return parts._replace(netloc=parts.hostname or "").geturl()


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx's default (certifi's CAs, hostname checks), made once: loading the CA
    bundle costs milliseconds a request need not pay."""
    return httpx.create_ssl_context()


class CheckedTransport(httpx.AsyncBaseTransport):
    """httpx's client over an httpcore pool whose connections are opened by
    :class:`CheckedNetworkBackend` (httpx's own transport does not take a network backend)."""

    def __init__(self, backend: CheckedNetworkBackend) -> None:
        self.backend = backend
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=_ssl_context(), network_backend=backend
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _mapped_errors():
            response = await self._pool.handle_async_request(core_request)
        assert isinstance(response.stream, AsyncIterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


@contextlib.contextmanager
def _mapped_errors() -> Iterator[None]:
    """httpcore's errors as httpx's errors of the same name (what httpx's own transport
    does), so callers see one family of errors."""
    try:
        yield
    except (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError) as exc:
        mapped: type[httpx.TransportError] = getattr(
            httpx, type(exc).__name__, httpx.TransportError
        )
        raise mapped(str(exc)) from exc
    except httpcore.UnsupportedProtocol as exc:
        raise httpx.UnsupportedProtocol(str(exc)) from exc


class _Body(httpx.AsyncByteStream):
    """An httpcore response body as httpx reads it."""

    def __init__(self, stream: AsyncIterable[bytes]) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _mapped_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()
