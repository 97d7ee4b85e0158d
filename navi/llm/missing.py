"""No usable LLM at all: the backend ``navi serve`` starts with rather than not starting.

With ``auto`` and neither Ollama answering nor the embedded model installed (or with
``NAVI_LLM_BACKEND=embedded`` and no embedded model), :class:`MissingBackend` stands in:
every call fails with one message that says why and how to connect an LLM, which the
chat shows as the turn's error and the footer's status dot as its tooltip; ``GET
/health`` names it ``"none"`` and the page shows how to connect one. An admin connects
one on the settings page (its "LLM server URL"); under ``auto``, an Ollama started later
is used from the next turn (navi.llm.auto).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

from navi.llm.collect import CompletesFromStream
from navi.llm.errors import LLMError
from navi.llm.stop import StopSignal
from navi.llm.types import ChatMessage, LLMOptions, ModelInfo, StreamChunk, ToolSpec

__all__ = ["HOW_TO_CONNECT", "MISSING", "MissingBackend", "NoLLMConnected"]

MISSING = "none"  # the backend's name, as GET /health and GET /llm/status show it
HOW_TO_CONNECT = (
    "To connect one: open Settings and give an LLM server's URL (Ollama or "
    "OpenAI-compatible), or start Ollama at OLLAMA_HOST, or install the embedded model "
    "(`make run` builds it: it needs a C++ compiler)."
)


class NoLLMConnected(LLMError):
    kind = "no_backend"


class MissingBackend(CompletesFromStream):
    """A backend that is not there: every call fails with ``why`` and ``how`` to
    connect one."""

    def __init__(self, why: str, *, num_ctx: int, how: str = HOW_TO_CONNECT) -> None:
        why = why.strip()
        if why and not why.endswith("."):
            why += "."
        self.error = NoLLMConnected(f"{why} {how}".strip())
        self._num_ctx = num_ctx

    @property
    def name(self) -> str:
        return MISSING

    @property
    def model(self) -> str:
        return ""

    @property
    def url(self) -> str:
        return ""

    async def stream_complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        options: LLMOptions | None = None,
        *,
        stop: StopSignal | None = None,
    ) -> AsyncGenerator[StreamChunk, None]:
        raise self.error
        yield  # pragma: no cover - makes this an async generator

    async def list_models(self) -> list[ModelInfo]:
        raise self.error

    async def context_window(self, model: str | None = None, num_ctx: int | None = None) -> int:
        return num_ctx or self._num_ctx

    async def aclose(self) -> None:
        return None
