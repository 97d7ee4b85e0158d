"""Choosing the backend: ``NAVI_LLM_BACKEND`` or a profile names one, or ``auto``.

``auto`` (the default) uses Ollama when it answers at ``OLLAMA_HOST``, otherwise the
embedded model (in an :class:`~navi.llm.auto.AutoBackend`, which moves to Ollama once
it answers), and logs which one and why.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import structlog

from navi.llm.auto import AutoBackend
from navi.llm.base import LLMBackend
from navi.llm.embedded import EmbeddedBackend
from navi.llm.errors import EmbeddedUnavailable, LLMError
from navi.llm.model_choice import choose_model
from navi.llm.ollama import OllamaBackend
from navi.llm.openai_compat import OpenAICompatibleBackend
from navi.llm.settings import BackendKind, LLMSettings

__all__ = ["NoBackendAvailable", "resolve_backend", "select_backend"]

log = structlog.get_logger()

PROBE_TIMEOUT = 2.0


class NoBackendAvailable(LLMError):
    kind = "no_backend"


async def select_backend(
    settings: LLMSettings,
    *,
    backend: BackendKind | None = None,
    model: str | None = None,
    probe_timeout: float = PROBE_TIMEOUT,
) -> LLMBackend:
    """The backend to use; ``backend`` / ``model`` (from a profile) override the settings."""
    kind = backend or settings.backend
    # A profile's model, or OLLAMA_DEFAULT_MODEL set: the operator's; else Navi may
    # use an installed model when the built-in default is not (navi.llm.model_choice).
    pinned = model is not None or settings.model_pinned
    if kind == "ollama":
        configured = OllamaBackend(settings, model=model)
        await choose_model(configured, pinned=pinned, time_limit=probe_timeout * 2)
        return _chosen(configured, "configured")
    if kind == "openai":
        return _chosen(OpenAICompatibleBackend(settings, model=model), "configured")
    if kind == "embedded":
        embedded = EmbeddedBackend(settings)
        embedded.model_path()  # raises EmbeddedUnavailable naming what is missing
        return _chosen(embedded, "configured")

    ollama = OllamaBackend(settings, model=model)
    try:
        version = await ollama.version(probe_timeout)
    except LLMError as unreachable:
        await ollama.aclose()
        embedded = EmbeddedBackend(settings)
        try:
            embedded.model_path()
        except EmbeddedUnavailable as missing:
            raise NoBackendAvailable(
                f"No LLM is available. {unreachable.message} {missing.message}"
            ) from missing
        # Ollama is asked again before new turns: one started later is then used.
        fallback = AutoBackend(embedded, settings, model=model, probe_timeout=probe_timeout)
        return _chosen(fallback, f"Ollama did not answer at {ollama.url}")
    await choose_model(ollama, pinned=pinned, time_limit=probe_timeout * 2)
    return _chosen(ollama, f"Ollama {version} answered at {ollama.url}")


async def resolve_backend(environ: Mapping[str, str] | None = None) -> LLMBackend:
    """:func:`select_backend` with the settings read from the environment."""
    return await select_backend(LLMSettings.from_env(os.environ if environ is None else environ))


def _chosen(backend: LLMBackend, reason: str) -> LLMBackend:
    choice = backend.model_choice if isinstance(backend, OllamaBackend) else None
    log.info(
        "llm.backend_selected",
        backend=backend.name,
        model=backend.model,
        url=backend.url,
        reason=reason,
        model_reason=choice.reason if choice is not None else "",
    )
    return backend
