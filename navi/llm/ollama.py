"""OllamaBackend: ``POST /api/chat`` streaming NDJSON, ``GET /api/tags`` for models."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec
import structlog

from navi.llm.errors import LLMError, ThinkingNotSupported
from navi.llm.guard import RawBatches
from navi.llm.http import HTTPBackend, line_blocks
from navi.llm.ollama_wire import (
    OllamaStreamParser,
    build_chat_request,
    encode_message,
    ollama_error,
    parse_tags,
)
from navi.llm.settings import LLMSettings
from navi.llm.stop import StopSignal
from navi.llm.types import ChatMessage, LLMOptions, ModelInfo, StreamChunk, ToolSpec
from navi.llm.windows import ollama_show_window

if TYPE_CHECKING:
    from navi.llm.model_choice import ModelChoice

__all__ = ["OllamaBackend"]

log = structlog.get_logger()


class OllamaBackend(HTTPBackend):
    """Talks to an Ollama server exactly as the ``ollama`` CLI and client do.

    When ``LLMOptions.think`` is not given, the ``OLLAMA_THINK`` default applies;
    a model that refuses thinking is then asked again without it (and remembered),
    so the global default never breaks non-reasoning models. An explicit
    ``think`` that the model refuses raises :class:`ThinkingNotSupported`.
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        model: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(
            settings,
            url or settings.ollama_host,
            setting="OLLAMA_HOST",
            model=model or settings.default_model,
            chat_path="/api/chat",
            encode_message=encode_message,
        )
        self._refuses_thinking: set[str] = set()
        # Why this model, when it is not the configured one (navi.llm.model_choice).
        self.model_choice: ModelChoice | None = None

    def use_model(self, model: str, choice: ModelChoice | None = None) -> None:
        """Use ``model`` when a call names none (``choice``: why)."""
        self._model = model
        self.model_choice = choice

    @property
    def name(self) -> str:
        return "ollama"

    def stream_complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        options: LLMOptions | None = None,
        *,
        stop: StopSignal | None = None,
    ) -> AsyncGenerator[StreamChunk, None]:
        opts = options if options is not None else LLMOptions()
        model = opts.model or self._model
        if opts.think is not None:
            # Thinking asked for or refused explicitly (the run always says): there is
            # no retry without it to make, so the guarded stream is the stream, without
            # another async generator around every chunk.
            return self._guarded(self._body(messages, tools, opts, model, opts.think), model, stop)
        return self._retrying(messages, tools, opts, model, stop)

    async def _retrying(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        opts: LLMOptions,
        model: str,
        stop: StopSignal | None,
    ) -> AsyncGenerator[StreamChunk, None]:
        """The stream with the configured thinking, asked again without it if the model
        refuses it before anything came (remembered for the model)."""
        think = None if model in self._refuses_thinking else self._settings.think
        while True:
            emitted = False
            try:
                body = self._body(messages, tools, opts, model, think)
                async with aclosing(self._guarded(body, model, stop)) as chunks:
                    async for chunk in chunks:
                        emitted = True
                        yield chunk
                return
            except ThinkingNotSupported:
                if emitted or not think:
                    raise
                self._refuses_thinking.add(model)
                log.warning("llm.thinking_unsupported", model=model, url=self._url)
                think = None

    def _body(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec],
        opts: LLMOptions,
        model: str,
        think: bool | str | None,
    ) -> dict[str, object]:
        return build_chat_request(
            messages,
            tools,
            model=model,
            num_ctx=opts.num_ctx or self._settings.num_ctx,
            think=think,
            temperature=opts.temperature,
            max_tokens=opts.max_tokens,
            keep_alive=opts.keep_alive,
            tool_choice=opts.tool_choice,
            wire=self._wire,
            stop=opts.stop,
            json_format=opts.json_format,
        )

    async def list_models(self) -> list[ModelInfo]:
        body = await self._get("/api/tags")
        try:
            return parse_tags(body)
        except msgspec.DecodeError:
            raise LLMError(
                f"The server at {self._url} did not answer /api/tags like Ollama does."
            ) from None

    async def context_window(self, model: str | None = None, num_ctx: int | None = None) -> int:
        """The window a call gets: the ``num_ctx`` Navi sends (``num_ctx``, else
        ``OLLAMA_NUM_CTX``), capped by the model's trained length from ``/api/show``
        (Ollama runs a model with no more than that)."""
        asked = num_ctx or self._settings.num_ctx
        name = model or self._model
        trained = await self._windows.get(name, lambda: self._trained_length(name))
        return min(asked, trained) if trained else asked

    async def _trained_length(self, model: str) -> int | None:
        try:
            body = await self._server.post(
                "/api/show",
                msgspec.json.encode({"model": model}),
                time_limit=self._settings.connect_timeout,
                on_error_status=self._status_error,
            )
        except LLMError as exc:
            log.info("llm.context_window_unknown", model=model, url=self._url, error=exc.message)
            return None
        return ollama_show_window(body)

    async def capabilities(self, model: str) -> list[str]:
        """What ``/api/show`` says ``model`` can do (``"completion"``, ``"tools"``,
        ``"thinking"``…; empty from an Ollama too old to say)."""
        body = await self._server.post(
            "/api/show",
            msgspec.json.encode({"model": model}),
            time_limit=self._settings.connect_timeout,
            on_error_status=self._status_error,
        )
        try:
            shown = msgspec.json.decode(body, type=dict[str, Any])
        except msgspec.DecodeError:
            return []
        found = shown.get("capabilities")
        return [str(c) for c in found] if isinstance(found, list) else []

    async def version(self, time_limit: float) -> str:
        """Ollama's version; raises ``ServerUnreachable`` if nothing Ollama-like answers."""
        body = await self._server.get(
            "/api/version", time_limit=time_limit, on_error_status=self._status_error
        )
        try:
            return str(msgspec.json.decode(body, type=dict[str, object])["version"])
        except (msgspec.DecodeError, KeyError):
            raise LLMError(f"The server at {self._url} is not an Ollama server.") from None

    async def _raw(self, body: bytes, model: str) -> RawBatches:
        parser = OllamaStreamParser(self._url)
        on_error_status = partial(ollama_error, model=model, url=self._url)
        async with self._server.stream(self._chat, body, on_error_status) as response:
            async for block in line_blocks(response):
                yield parser.feed(block)
                parser.raise_pending()
        yield parser.finish()
