"""The HTTP side of the Ollama and OpenAI-compatible backends: one httpx client per LLM
server, for its chat streams and its small requests, the errors both map to, and
:class:`HTTPBackend`, what both backends hold and do alike (their wire formats differ).

The client is httpx on aiohttp's connection pool, with a bounded wait for a connection
(:mod:`navi.llm.transport`).

Stop and timeouts are not here: the stream guard (:mod:`navi.llm.guard`) awaits every
read of a stream inside one cancel scope, and a cancelled read unwinds the ``async
with`` of :meth:`LLMServer.stream`, which closes the connection (so the server stops
generating). The client itself has a connect timeout, no read timeout.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import msgspec

from navi.llm.collect import CompletesFromStream
from navi.llm.errors import (
    IncompleteStream,
    LLMError,
    LLMRedirected,
    LLMServerError,
    ServerUnreachable,
    redact_url,
)
from navi.llm.guard import RawBatches, guard_stream
from navi.llm.settings import LLMSettings
from navi.llm.stop import StopSignal
from navi.llm.transport import (
    ConnectionSlots,
    describe,
    failure_kind,
    is_transport_error,
    pooled_client,
)
from navi.llm.types import ChatMessage, StreamChunk
from navi.llm.windows import WindowCache
from navi.llm.wire_parts import WireParts

__all__ = ["HTTPBackend", "LLMServer", "cut_lines", "error_detail", "error_text", "line_blocks"]

JSON_HEADERS = {"content-type": "application/json", "accept": "application/json"}
# LLMSettings' defaults, for a server made without settings (probes, tests).
MAX_CONNECTIONS = LLMSettings().max_connections
POOL_TIMEOUT = LLMSettings().pool_timeout

# Turns an HTTP error answer (status, body) into the error a user understands.
OnErrorStatus = Callable[[int, bytes], LLMError]

_encoder = msgspec.json.Encoder()


class LLMServer:
    """The LLM server a backend talks to: one pooled ``httpx.AsyncClient`` for its base
    URL, and that URL as it may be shown (``url``: credentials replaced by ``***``).

    ``setting`` names the variable that holds the base URL (``OLLAMA_HOST``): a redirect
    error tells the user to set it to the final address."""

    __slots__ = ("client", "setting", "slots", "url")

    def __init__(
        self,
        base_url: str,
        *,
        setting: str,
        connect_timeout: float,
        api_key: str = "",
        max_connections: int = MAX_CONNECTIONS,
        pool_timeout: float = POOL_TIMEOUT,
    ) -> None:
        self.url = redact_url(base_url)
        self.setting = setting
        headers = dict(JSON_HEADERS)
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self.slots = ConnectionSlots(self.url, connections=max_connections, timeout=pool_timeout)
        self.client = pooled_client(
            base_url,
            headers=headers,
            connect_timeout=connect_timeout,
            max_connections=max_connections,
            pool_timeout=pool_timeout,
        )

    def endpoint(self, path: str) -> httpx.URL:
        """The absolute URL of ``path`` under the base URL, as the client would join them
        (the base keeps its own path: ``…/v1`` + ``/chat/completions``); built once per
        backend rather than on every call."""
        base = self.client.base_url
        return base.copy_with(raw_path=base.raw_path + path.lstrip("/").encode("ascii"))

    @asynccontextmanager
    async def stream(
        self, target: httpx.URL, body: bytes, on_error_status: OnErrorStatus
    ) -> AsyncIterator[httpx.Response]:
        """POST ``body`` to ``target`` (an :meth:`endpoint`) and hand over the streaming
        answer. Any answer but a 2xx is an :class:`LLMError` (a 3xx's names the place it
        points to; another's body is read whole for ``on_error_status``), and so are
        transport failures, including those while the body is read inside the block.
        Cancellation passes through untouched; leaving the block closes the answer (and
        its connection if unread)."""
        async with self.slots.held():
            try:
                async with self.client.stream("POST", target, content=body) as response:
                    if response.status_code >= 300:
                        raise self._refusal(response, await response.aread(), on_error_status)
                    yield response
            except Exception as exc:
                if not is_transport_error(exc):
                    raise
                raise self._transport_error(exc) from exc

    def root(self, path: str) -> httpx.URL:
        """``path`` at the server's root, outside the base URL's path (llama.cpp's
        ``/props`` beside its ``/v1``)."""
        return self.client.base_url.copy_with(raw_path=path.encode("ascii"))

    async def get(
        self, path: str | httpx.URL, *, time_limit: float, on_error_status: OnErrorStatus
    ) -> bytes:
        """A small request (model lists, probes); returns the body."""
        return await self._small("GET", path, None, time_limit, on_error_status)

    async def post(
        self, path: str, body: bytes, *, time_limit: float, on_error_status: OnErrorStatus
    ) -> bytes:
        """A small JSON request that is a POST (Ollama's ``/api/show``); returns the body."""
        return await self._small("POST", path, body, time_limit, on_error_status)

    async def _small(
        self,
        method: str,
        path: str | httpx.URL,
        body: bytes | None,
        time_limit: float,
        on_error_status: OnErrorStatus,
    ) -> bytes:
        async with self.slots.held():
            try:
                response = await self.client.request(method, path, content=body, timeout=time_limit)
            except Exception as exc:
                if not is_transport_error(exc):
                    raise
                if failure_kind(exc) == "timeout":
                    detail = f"no answer within {time_limit:g} s"
                    raise ServerUnreachable(self.url, detail=detail) from exc
                raise ServerUnreachable(self.url, detail=describe(exc)) from exc
        if response.status_code >= 300:
            raise self._refusal(response, response.content, on_error_status)
        return response.content

    async def aclose(self) -> None:
        await self.client.aclose()

    def _refusal(
        self, response: httpx.Response, body: bytes, on_error_status: OnErrorStatus
    ) -> LLMError:
        if response.status_code >= 400:
            return on_error_status(response.status_code, body)
        # A redirect: followed, it would turn the POST into a GET (301/302) or send the
        # body and the API key to another place; the user should point Navi there.
        location = response.headers.get("location", "")
        target = str(response.request.url.join(location)) if location else "nowhere"
        return LLMRedirected(response.status_code, target, url=self.url, setting=self.setting)

    def _transport_error(self, exc: Exception) -> LLMError:
        kind = failure_kind(exc)
        detail = describe(exc)
        if kind == "dropped":
            return IncompleteStream(f"the connection dropped ({detail})", url=self.url)
        if kind in ("refused", "timeout"):  # connect, write or pool: reads have none
            return ServerUnreachable(self.url, detail=detail)
        return LLMError(f"HTTP error talking to the LLM server at {self.url}: {detail}")


class HTTPBackend(CompletesFromStream):
    """What the Ollama and OpenAI-compatible backends share: their :class:`LLMServer`,
    default model, chat endpoint, pre-encoded request parts and context windows, and
    the guard around a chat stream. Each reads its own wire format in ``_raw``."""

    def __init__(
        self,
        settings: LLMSettings,
        base_url: str,
        *,
        setting: str,
        api_key: str = "",
        model: str,
        chat_path: str,
        encode_message: Callable[[ChatMessage], Any],
    ) -> None:
        self._settings = settings
        self._server = LLMServer(
            base_url,
            setting=setting,
            connect_timeout=settings.connect_timeout,
            api_key=api_key,
            max_connections=settings.max_connections,
            pool_timeout=settings.pool_timeout,
        )
        self._url = self._server.url  # (credentials hidden: for messages and logs)
        self._model = model
        self._chat = self._server.endpoint(chat_path)
        self._wire = WireParts(encode_message)
        self._windows = WindowCache()

    @property
    def model(self) -> str:
        return self._model

    @property
    def url(self) -> str:
        return self._url

    async def aclose(self) -> None:
        await self._server.aclose()

    def _guarded(
        self, body: dict[str, object], model: str, stop: StopSignal | None
    ) -> AsyncGenerator[StreamChunk, None]:
        return guard_stream(
            self._raw(_encoder.encode(body), model),
            stop=stop,
            first_chunk_timeout=self._settings.first_chunk_timeout,
            chunk_timeout=self._settings.chunk_timeout,
            url=self._url,
        )

    def _raw(self, body: bytes, model: str) -> RawBatches:
        """The chat answer to ``body``, parsed into batches (one per network read)."""
        raise NotImplementedError

    async def _get(self, path: str | httpx.URL) -> bytes:
        """A small GET (model lists, windows) within the connect timeout."""
        return await self._server.get(
            path, time_limit=self._settings.connect_timeout, on_error_status=self._status_error
        )

    def _status_error(self, status: int, content: bytes) -> LLMError:
        return LLMServerError(status, error_detail(content), url=self._url)


def cut_lines(tail: bytes, data: bytes) -> tuple[bytes, bytes]:
    """The whole lines of ``tail + data`` (``b""`` if none) and what follows them."""
    cut = data.rfind(b"\n")
    if cut < 0:
        return b"", tail + data
    # (A full-length slice of bytes is the object itself: no copy on the fast path.)
    return (tail + data[: cut + 1] if tail else data[: cut + 1]), data[cut + 1 :]


async def line_blocks(response: httpx.Response) -> AsyncIterator[bytes]:
    """Yield the body as blocks of whole lines, one block per network read.

    A read that completes no line yields ``b""``: it still proves the server is
    alive. An unterminated last line is yielded at the end with a newline added.
    """
    tail = b""
    async for data in response.aiter_bytes():
        block, tail = cut_lines(tail, data)
        yield block
    if tail.strip():
        yield tail + b"\n"


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
