"""What the HTTP backends share: the clients, error mapping, and line splitting."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import httpx
import msgspec

from navi.llm.errors import IncompleteStream, LLMError, ServerUnreachable
from navi.llm.lean_http import LeanClient, LeanResponse, cut_lines, lean_applies
from navi.llm.watchdog import Watchdog

__all__ = [
    "StreamClient",
    "StreamResponse",
    "close_clients",
    "endpoint",
    "error_detail",
    "error_text",
    "line_blocks",
    "make_client",
    "make_stream_client",
    "open_stream",
    "request_json",
    "stream_watchdog",
]

# What carries a backend's chat streams: the lean client where it applies, else httpx.
StreamClient = LeanClient | httpx.AsyncClient


class StreamResponse(Protocol):
    """A streaming answer, from either client."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    async def aread(self) -> bytes: ...


JSON_HEADERS = {"content-type": "application/json", "accept": "application/json"}


def make_client(base_url: str, *, connect_timeout: float, api_key: str = "") -> httpx.AsyncClient:
    """One pooled client per backend. No read timeout: the stream guard owns those.

    The JSON headers are the client's own, not merged into each request: every request
    of a backend speaks JSON, and merging headers is part of what a request costs."""
    headers = dict(JSON_HEADERS)
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return httpx.AsyncClient(
        base_url=base_url,
        headers=headers,
        timeout=httpx.Timeout(connect=connect_timeout, read=None, write=60.0, pool=None),
    )


def make_stream_client(
    client: httpx.AsyncClient, *, connect_timeout: float, api_key: str = ""
) -> StreamClient:
    """The client for a backend's chat streams: the lean one for a plain ``http://``
    server reached without a proxy, else ``client`` itself (see :mod:`lean_http`)."""
    if lean_applies(client.base_url):
        return LeanClient(client.base_url, connect_timeout=connect_timeout, api_key=api_key)
    return client


async def close_clients(client: httpx.AsyncClient, streams: StreamClient) -> None:
    """Close a backend's clients (``streams`` may be ``client`` itself)."""
    try:
        if streams is not client:
            await streams.aclose()
    finally:
        await client.aclose()


def stream_watchdog(client: StreamClient) -> Watchdog | None:
    """A watchdog for one stream of ``client`` if it can be watched (the lean client),
    else ``None``: httpx's streams get the guard's cancel scopes (see
    :mod:`navi.llm.watchdog`)."""
    return client.watchdog() if isinstance(client, LeanClient) else None


def endpoint(client: httpx.AsyncClient, path: str) -> httpx.URL:
    """The absolute URL of ``path`` under the client's base URL, as the client would
    join them (the base keeps its own path: ``…/v1`` + ``/chat/completions``). Built once
    per backend: joining a relative path costs more than the rest of building a request."""
    base = client.base_url
    return base.copy_with(raw_path=base.raw_path + path.lstrip("/").encode("ascii"))


def open_stream(
    client: StreamClient,
    path: httpx.URL,
    body: bytes,
    *,
    url: str,
    on_error_status: Callable[[int, bytes], LLMError],
    watchdog: Watchdog | None = None,
) -> AbstractAsyncContextManager[StreamResponse]:
    """POST ``body`` to ``path`` (an :func:`endpoint`) and hand over the streaming
    response; transport failures become :class:`LLMError` s. ``watchdog``: from
    :func:`stream_watchdog` for the same client.

    A non-2xx answer is read in full and turned into an error by ``on_error_status``.
    Cancellation passes through untouched, and leaving the block closes the
    response (and so the connection if unread), which tells the server to stop.
    """
    if isinstance(client, LeanClient):
        return client.stream(
            path.raw_path, body, url=url, on_error_status=on_error_status, watchdog=watchdog
        )
    return _httpx_stream(client, path, body, url=url, on_error_status=on_error_status)


@asynccontextmanager
async def _httpx_stream(
    client: httpx.AsyncClient,
    path: httpx.URL,
    body: bytes,
    *,
    url: str,
    on_error_status: Callable[[int, bytes], LLMError],
) -> AsyncIterator[httpx.Response]:
    try:
        async with client.stream("POST", path, content=body) as response:
            if response.status_code >= 400:
                raise on_error_status(response.status_code, await response.aread())
            yield response
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise ServerUnreachable(url, detail=_describe(exc)) from exc
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        raise IncompleteStream(f"the connection dropped ({_describe(exc)})", url=url) from exc
    except httpx.TimeoutException as exc:  # write or pool timeout: reads have none
        raise ServerUnreachable(url, detail=_describe(exc)) from exc
    except httpx.HTTPError as exc:
        raise LLMError(f"HTTP error talking to the LLM server at {url}: {_describe(exc)}") from exc


async def request_json(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    *,
    url: str,
    time_limit: float,
    on_error_status: Callable[[int, bytes], LLMError],
) -> bytes:
    """A small non-streaming request (model lists, probes); returns the body."""
    try:
        response = await client.request(method, path, timeout=time_limit)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise ServerUnreachable(url, detail=_describe(exc)) from exc
    except httpx.TimeoutException as exc:
        raise ServerUnreachable(url, detail=f"no answer within {time_limit:g} s") from exc
    except httpx.HTTPError as exc:
        raise ServerUnreachable(url, detail=_describe(exc)) from exc
    if response.status_code >= 400:
        raise on_error_status(response.status_code, response.content)
    return response.content


def line_blocks(response: StreamResponse) -> AsyncIterator[bytes]:
    """Yield the body as blocks of whole lines, one block per network read.

    A read that completes no line yields ``b""``: it still proves the server is
    alive. An unterminated last line is yielded at the end with a newline added.
    """
    if isinstance(response, LeanResponse):
        return response.line_blocks()
    return _line_blocks(response)


async def _line_blocks(response: StreamResponse) -> AsyncIterator[bytes]:
    tail = b""
    async for data in response.aiter_bytes():
        block, tail = cut_lines(tail, data)
        yield block
    if tail.strip():
        yield tail + b"\n"


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def error_detail(body: bytes) -> str:
    """The message in ``{"error": "..."}``, ``{"error": {"message": ...}}``,
    ``{"message": ...}`` (older vLLM), ``{"detail": ...}`` (FastAPI) or plain text."""
    try:
        value = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body.decode("utf-8", "replace").strip()[:500] or "(empty answer)"
    if isinstance(value, dict):
        for key in ("error", "message", "detail"):
            if value.get(key) is not None:
                return error_text(value[key])
    return str(value)[:500]


def error_text(error: Any) -> str:
    """An error value from a body or a stream line, as one readable string."""
    if isinstance(error, dict):
        return str(error.get("message") or error.get("detail") or error)
    return str(error)
