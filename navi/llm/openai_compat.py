"""OpenAICompatibleBackend: ``POST /v1/chat/completions`` (SSE), ``GET /v1/models``.

Works against Ollama's /v1, vLLM, llama.cpp's server, LM Studio and
llama-cpp-python's server; the quirks are handled in :mod:`navi.llm.openai_wire`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from functools import partial

import msgspec
import structlog

from navi.llm.errors import LLMError
from navi.llm.guard import RawBatches
from navi.llm.http import HTTPBackend, line_blocks
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
from navi.llm.windows import llama_cpp_props_window, openai_models_window

__all__ = ["OpenAICompatibleBackend"]

log = structlog.get_logger()


class OpenAICompatibleBackend(HTTPBackend):
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
        super().__init__(
            settings,
            (url or settings.openai_base_url).rstrip("/"),
            setting="OPENAI_BASE_URL",
            api_key=settings.openai_api_key if api_key is None else api_key,
            model=model or settings.openai_model or settings.default_model,
            chat_path="/chat/completions",
            encode_message=encode_message,
        )

    @property
    def name(self) -> str:
        return "openai"

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
            stop=opts.stop,
            json_format=opts.json_format,
        )
        return self._guarded(body, model, stop)

    async def list_models(self) -> list[ModelInfo]:
        body = await self._get("/models")
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
        try:
            body = await self._get("/models")
        except LLMError as exc:
            log.info("llm.context_window_unknown", model=model, url=self._url, error=exc.message)
            return None
        window, trained = openai_models_window(body, model)
        if window:
            return window
        try:  # llama.cpp's server: the context it runs with is in /props, at its root
            window = llama_cpp_props_window(await self._get(self._server.root("/props")))
        except LLMError:
            window = None
        return window or trained

    async def _raw(self, body: bytes, model: str) -> RawBatches:
        parser = OpenAIStreamParser(self._url)
        on_error_status = partial(openai_error, model=model, url=self._url)
        async with self._server.stream(self._chat, body, on_error_status) as response:
            if response.headers.get("content-type", "").startswith("application/json"):
                # A server that does not stream (or not with these options) answers whole.
                yield parser.feed_completion(await response.aread())
                return
            async for block in line_blocks(response):
                yield parser.feed(block)
                parser.raise_pending()
        yield parser.finish()
