"""The LLM client's engine: httpx's API on aiohttp's connection pool (the
``httpx-aiohttp`` transport, the one the official OpenAI SDK offers), and what that
transport does not do as httpx's own did.

A streamed read costs half the CPU of httpx's own transport (bench/llm_read.py), which
counts when hundreds of sessions stream at once. What is added here:

- the proxy of the environment (:func:`environment_proxy`), which the transport does not
  read, once per server;
- what a failure was (:func:`failure_kind`): the transport maps a refused connection and
  a dropped stream alike to httpx's ``ConnectTimeout``; the aiohttp error under it says;
- an explicit bound on connections (:class:`ConnectionSlots`): at most
  ``NAVI_LLM_MAX_CONNECTIONS`` at once, and a call that waits longer than
  ``NAVI_LLM_POOL_TIMEOUT`` for one gets :class:`LLMBusy`, never a silent wait.

aiohttp is imported when the first client is made (a quarter second): a command that
never calls an LLM does not pay it.
"""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

import anyio
import httpx

from navi.llm.errors import LLMBusy, LLMError, redact_url

__all__ = [
    "ConnectionSlots",
    "FailureKind",
    "describe",
    "environment_proxy",
    "failure_kind",
    "is_transport_error",
    "pooled_client",
    "underlying",
]

# As httpx's default: a write that makes no progress for a minute is a dead server.
# (aiohttp has no write timeout: a stream's write is bounded by the first-chunk timeout.)
WRITE_TIMEOUT = 60.0

# What a transport failure was: no connection, no answer in time, or a connection lost.
FailureKind = Literal["refused", "timeout", "dropped", "other"]


def pooled_client(
    base_url: str,
    *,
    headers: dict[str, str],
    connect_timeout: float,
    max_connections: int,
    pool_timeout: float,
) -> httpx.AsyncClient:
    """An httpx client for ``base_url`` on a pool of at most ``max_connections``.

    Credentials in the URL become HTTP Basic auth, as httpx makes them, and the URL goes
    on without them (aiohttp refuses both an Authorization header and a URL's). Redirects
    are not followed (httpx's default). No read timeout: the stream guard's."""
    from httpx_aiohttp import AiohttpTransport

    url = httpx.URL(base_url)
    auth = httpx.BasicAuth(url.username, url.password) if url.userinfo else None
    transport = AiohttpTransport(
        limits=httpx.Limits(max_connections=max_connections),
        proxy=environment_proxy(base_url),
    )
    return httpx.AsyncClient(
        base_url=url.copy_with(userinfo=b"") if auth else url,
        auth=auth,
        headers=headers,
        transport=transport,
        timeout=httpx.Timeout(
            connect=connect_timeout, read=None, write=WRITE_TIMEOUT, pool=pool_timeout
        ),
    )


class ConnectionSlots:
    """As many slots as the pool has connections: a call holds one for as long as it
    uses its connection, so the pool (as large) never makes it wait unseen, and a wait
    has a bound and a clear error."""

    __slots__ = ("_slots", "connections", "timeout", "url")

    def __init__(self, url: str, *, connections: int, timeout: float) -> None:
        self._slots = anyio.Semaphore(connections)
        self.url = url
        self.connections = connections
        self.timeout = timeout

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Hold a slot for the block; :class:`LLMBusy` when none frees up in time."""
        try:
            self._slots.acquire_nowait()
        except anyio.WouldBlock:
            with anyio.move_on_after(self.timeout) as waiting:
                await self._slots.acquire()
            if waiting.cancelled_caught:
                raise LLMBusy(self.url, connections=self.connections, waited=self.timeout) from None
        try:
            yield
        finally:
            self._slots.release()


def environment_proxy(base_url: str) -> httpx.Proxy | None:
    """The proxy the environment names for ``base_url`` (``HTTPS_PROXY``, ``HTTP_PROXY``
    or ``ALL_PROXY``, any case), or None when there is none or ``NO_PROXY`` exempts its
    host — read once, as httpx's own transport did, with urllib's rules, as aiohttp's
    ``trust_env`` reads them (on every request, in a thread). A SOCKS proxy is refused:
    aiohttp speaks HTTP proxies only."""
    proxies = urllib.request.getproxies()
    url = httpx.URL(base_url)
    proxy = proxies.get(url.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(url.host):
        return None
    if not proxy.startswith(("http://", "https://")):
        raise LLMError(
            f"The proxy {redact_url(proxy)} named by the environment for "
            f"{redact_url(base_url)} is not an HTTP proxy, which is all Navi's LLM client "
            "can use; set NO_PROXY to reach the LLM server directly, or name an HTTP proxy."
        )
    return httpx.Proxy(proxy)


def is_transport_error(exc: Exception) -> bool:
    """An error of the HTTP client: httpx's, or aiohttp's that the transport leaves
    unmapped (a garbled status line, say)."""
    import aiohttp

    return isinstance(exc, httpx.HTTPError | aiohttp.ClientError)


def underlying(exc: BaseException) -> BaseException:
    """The aiohttp error under the transport's httpx one, else ``exc`` itself."""
    import aiohttp

    cause = exc.__cause__
    return cause if isinstance(cause, aiohttp.ClientError) else exc


def failure_kind(exc: BaseException) -> FailureKind:
    """What a transport failure was, from the aiohttp error under it or httpx's own."""
    import aiohttp

    cause = underlying(exc)
    if isinstance(cause, aiohttp.ServerTimeoutError | httpx.TimeoutException):
        return "timeout"
    if isinstance(
        cause,
        aiohttp.ClientConnectorError
        | aiohttp.ClientHttpProxyError
        | httpx.ConnectError
        | httpx.ProxyError,
    ):
        return "refused"
    if isinstance(
        cause,
        # (ClientResponseError: an answer aiohttp could not parse, a garbled status line)
        aiohttp.ClientPayloadError
        | aiohttp.ClientConnectionError
        | aiohttp.ClientResponseError
        | httpx.RemoteProtocolError
        | httpx.ReadError,
    ):
        return "dropped"
    return "other"


def describe(exc: BaseException) -> str:
    """The failure as a user may read it: the aiohttp error's name and text, if any."""
    cause = underlying(exc)
    text = str(cause).strip()
    return f"{type(cause).__name__}: {text}" if text else type(cause).__name__
