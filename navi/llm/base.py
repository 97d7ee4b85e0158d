"""The contract every LLM backend fulfils."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Protocol, runtime_checkable

from navi.llm.stop import StopSignal
from navi.llm.types import ChatMessage, Completion, LLMOptions, ModelInfo, StreamChunk, ToolSpec

__all__ = ["LLMBackend"]


@runtime_checkable
class LLMBackend(Protocol):
    """An LLM Navi can talk to.

    ``stream_complete`` yields thinking pieces, text pieces and complete tool calls,
    then exactly one :class:`~navi.llm.types.FinalChunk` (finish reason and token
    counts); anything else is an :class:`~navi.llm.errors.LLMError`. A set
    ``stop`` ends it within one chunk (and at once while waiting) with
    ``FinalChunk(finish_reason="stopped")``. Close the iterator (``aclosing``) if
    you leave it early: that closes the connection and the server stops.
    """

    @property
    def name(self) -> str:
        """``"ollama"``, ``"openai"`` or ``"embedded"``."""
        ...

    @property
    def model(self) -> str:
        """The model used when ``LLMOptions.model`` is not given."""
        ...

    @property
    def url(self) -> str:
        """Where the backend's server is (``embedded:<path>`` for the embedded one)."""
        ...

    def stream_complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        options: LLMOptions | None = None,
        *,
        stop: StopSignal | None = None,
    ) -> AsyncGenerator[StreamChunk, None]: ...

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        options: LLMOptions | None = None,
        *,
        stop: StopSignal | None = None,
    ) -> Completion: ...

    async def list_models(self) -> list[ModelInfo]: ...

    async def context_window(self, model: str | None = None, num_ctx: int | None = None) -> int:
        """The context window, in tokens, a call with this ``model`` (else the default)
        and ``num_ctx`` (else the settings') really gets, as the server in use tells
        (cached per model)."""
        ...

    async def aclose(self) -> None: ...
