"""``NAVI_LLM_BACKEND=auto`` after a fall-back: the embedded model until Ollama answers.

At start-up ``auto`` uses Ollama if it answers at ``OLLAMA_HOST``, else the embedded
model. Before, that choice held until Navi restarted: an Ollama started a minute later
was never used. :class:`AutoBackend` holds the backend in use and delegates everything
to it; :meth:`AutoBackend.before_turn` (called when a new turn is about to start, never
during one) asks Ollama again, at most every ``NAVI_LLM_REPROBE_SECONDS``, and moves to
it when it answers. Once on Ollama it stays there: a server that goes away later is an
error the user sees (and retries), not a silent step down to a tiny model.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable, Sequence

import structlog

from navi.llm.base import LLMBackend
from navi.llm.collect import CompletesFromStream
from navi.llm.errors import LLMError
from navi.llm.model_choice import ModelChoice, choose_model
from navi.llm.ollama import OllamaBackend
from navi.llm.settings import LLMSettings
from navi.llm.stop import StopSignal
from navi.llm.types import ChatMessage, LLMOptions, ModelInfo, StreamChunk, ToolSpec

__all__ = ["AutoBackend", "backend_in_use", "model_choice_of"]

log = structlog.get_logger()


class AutoBackend(CompletesFromStream):
    """The backend ``auto`` fell back to, until Ollama answers (then Ollama). Its
    ``complete()`` gathers the stream of the backend in use, as that backend's own does."""

    def __init__(
        self,
        fallback: LLMBackend,
        settings: LLMSettings,
        *,
        model: str | None = None,
        probe_timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.current = fallback
        self._settings = settings
        self._model = model
        self._probe_timeout = probe_timeout
        self._clock = clock
        self._next_probe = clock() + settings.reprobe_seconds
        # Backends left behind: a run already streaming from one finishes on it.
        self._retired: list[LLMBackend] = []

    @property
    def name(self) -> str:
        return self.current.name

    @property
    def model(self) -> str:
        return self.current.model

    @property
    def url(self) -> str:
        return self.current.url

    @property
    def switched(self) -> bool:
        return isinstance(self.current, OllamaBackend)

    async def before_turn(self, *, now: bool = False) -> bool:
        """Ask Ollama again if it is time (``now``: whenever); True when Navi now uses
        it (with an installed model if the configured one is not: navi.llm.model_choice)."""
        if self.switched or (not now and self._clock() < self._next_probe):
            return False
        self._next_probe = self._clock() + self._settings.reprobe_seconds
        ollama = OllamaBackend(self._settings, model=self._model)
        try:
            version = await ollama.version(self._probe_timeout)
        except LLMError:
            await ollama.aclose()
            return False
        pinned = self._model is not None or self._settings.model_pinned
        await choose_model(ollama, pinned=pinned, time_limit=self._probe_timeout * 2)
        log.info(
            "llm.backend_switched",
            backend=ollama.name,
            model=ollama.model,
            url=ollama.url,
            previous=self.current.name,
            reason=f"Ollama {version} answered at {ollama.url}",
        )
        self._retired.append(self.current)
        self.current = ollama
        return True

    def stream_complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        options: LLMOptions | None = None,
        *,
        stop: StopSignal | None = None,
    ) -> AsyncGenerator[StreamChunk, None]:
        # The backend's own stream, not a generator around it: nothing added per chunk.
        return self.current.stream_complete(messages, tools, options, stop=stop)

    async def list_models(self) -> list[ModelInfo]:
        return await self.current.list_models()

    async def context_window(self, model: str | None = None, num_ctx: int | None = None) -> int:
        return await self.current.context_window(model, num_ctx)

    async def aclose(self) -> None:
        for backend in (*self._retired, self.current):
            await backend.aclose()


def backend_in_use(backend: LLMBackend) -> LLMBackend:
    """The backend that answers: the one an :class:`AutoBackend` delegates to."""
    return backend.current if isinstance(backend, AutoBackend) else backend


def model_choice_of(backend: LLMBackend) -> ModelChoice | None:
    """Why the backend in use has its model, if Navi chose it (None off Ollama)."""
    in_use = backend_in_use(backend)
    return in_use.model_choice if isinstance(in_use, OllamaBackend) else None
