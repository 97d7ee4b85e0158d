"""OpenAICompatibleBackend: ``POST /v1/chat/completions`` (SSE), ``GET /v1/models``.

Works against Ollama's /v1, vLLM, llama.cpp's server, LM Studio and
llama-cpp-python's server; the quirks are handled in :mod:`navi.llm.openai_wire`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

import msgspec
import structlog

from navi.llm.collect import CompletesFromStream
from navi.llm.errors import LLMError, LLMServerError
from navi.llm.guard import RawBatches, guard_stream
from navi.llm.http import LLMServer, error_detail, line_blocks
from navi.llm.openai_wire import (
    OpenAIStreamParser,
    build_chat_request,
    encode_message,
    openai_error,
    parse_models,
)
from navi.llm.settings import LLMSettings
from navi.llm.stop import StopSignal
from navi.llm.types import ChatMessage, LLMOptions, ModelInfo, StreamChunk, ToolSpec
from navi.llm.windows import WindowCache, llama_cpp_props_window, openai_models_window
from navi.llm.wire_parts import WireParts

__all__ = ["OpenAICompatibleBackend"]

log = structlog.get_logger()
_encoder = msgspec.json.Encoder()


class OpenAICompatibleBackend(CompletesFromStream):
    """Talks to any server that implements OpenAI's chat-completions API.

    ``LLMOptions.think`` as a level becomes ``reasoning_effort``; ``True`` /
    ``False`` are not sent (each server has its own switch). ``num_ctx`` and
    ``keep_alive`` are the server's business and are not sent either.
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        model: str | None = None,
        url: str | None = None,
        api_key: str | None = None,
    ) -> None:
        self._settings = settings
        self._server = LLMServer(
            (url or settings.openai_base_url).rstrip("/"),
            setting="OPENAI_BASE_URL",
            connect_timeout=settings.connect_timeout,
            api_key=settings.openai_api_key if api_key is None else api_key,
        )
        self._url = self._server.url  # (credentials hidden: for messages and logs)
        self._model = model or settings.openai_model or settings.default_model
        self._chat = self._server.endpoint("/chat/completions")
        self._wire = WireParts(encode_message)
        self._windows = WindowCache()

    @property
    def name(self) -> str:
        return "openai"

    @property
    def model(self) -> str:
        return self._model

    @property
    def url(self) -> str:
        return self._url

    def stream_complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        options: LLMOptions | None = None,
        *,
        stop: StopSignal | None = None,
    ) -> AsyncGenerator[StreamChunk, None]:
        # The guarded stream is the stream: no async generator around every chunk.
        opts = options if options is not None else LLMOptions()
        model = opts.model or self._model
        body = build_chat_request(
            messages,
            tools,
            model=model,
            think=opts.think,
            temperature=opts.temperature,
            max_tokens=opts.max_tokens,
            tool_choice=opts.tool_choice,
            wire=self._wire,
        )
        return guard_stream(
            self._raw(_encoder.encode(body), model),
            stop=stop,
            first_chunk_timeout=self._settings.first_chunk_timeout,
            chunk_timeout=self._settings.chunk_timeout,
            url=self._url,
        )

    async def list_models(self) -> list[ModelInfo]:
        body = await self._server.get(
            "/models", time_limit=self._settings.connect_timeout, on_error_status=self._status_error
        )
        try:
            return parse_models(body)
        except msgspec.DecodeError:
            raise LLMError(
                f"The server at {self._url} did not answer /models like an "
                "OpenAI-compatible server does."
            ) from None

    async def context_window(self, model: str | None = None, num_ctx: int | None = None) -> int:
        """What the server says about the model: a ``/models`` entry's
        ``max_model_len`` (vLLM), ``context_length`` and kin; llama.cpp's ``/props``
        ``n_ctx``, else its ``meta.n_ctx_train``. A server that says nothing leaves
        ``num_ctx`` / ``OLLAMA_NUM_CTX`` (Navi sends no window to these servers)."""
        name = model or self._model
        told = await self._windows.get(name, lambda: self._told_window(name))
        return told or num_ctx or self._settings.num_ctx

    async def _told_window(self, model: str) -> int | None:
        limit = self._settings.connect_timeout
        try:
            body = await self._server.get(
                "/models", time_limit=limit, on_error_status=self._status_error
            )
        except LLMError as exc:
            log.info("llm.context_window_unknown", model=model, url=self._url, error=exc.message)
            return None
        window, trained = openai_models_window(body, model)
        if window:
            return window
        try:  # llama.cpp's server: the context it runs with is in /props, at its root
            props = await self._server.get(
                self._server.root("/props"), time_limit=limit, on_error_status=self._status_error
            )
            window = llama_cpp_props_window(props)
        except LLMError:
            window = None
        return window or trained

    async def aclose(self) -> None:
        await self._server.aclose()

    async def _raw(self, body: bytes, model: str) -> RawBatches:
        parser = OpenAIStreamParser(self._url)

        def on_error_status(status: int, content: bytes) -> LLMError:
            return openai_error(status, content, model=model, url=self._url)

        async with self._server.stream(self._chat, body, on_error_status) as response:
            if response.headers.get("content-type", "").startswith("application/json"):
                # A server that does not stream (or not with these options) answers whole.
                yield parser.feed_completion(await response.aread())
                return
            async for block in line_blocks(response):
                yield parser.feed(block)
                parser.raise_pending()
        yield parser.finish()

    def _status_error(self, status: int, content: bytes) -> LLMError:
        return LLMServerError(status, error_detail(content), url=self._url)
