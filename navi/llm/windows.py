"""The context window a backend really has: read from what its server says about the model.

The context meter and compression need the window of the model actually in use, not
``OLLAMA_NUM_CTX``: on the embedded backend that is llama.cpp's ``n_ctx`` (8,192), on
Ollama the smaller of the model's trained length and the ``num_ctx`` Navi asks for,
on an OpenAI-compatible server whatever the server tells about the model.

Here: the parsers of those answers (pure, on bytes) and the cache the backends keep
them in. A server that says nothing usable leaves the configured value in place.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec

__all__ = [
    "WindowCache",
    "llama_cpp_props_window",
    "ollama_show_window",
    "openai_models_window",
]

# A server that could not tell (down, an old version, a model not pulled) is asked
# again after this long, not before every LLM call.
RETRY_UNKNOWN_S = 60.0

# The fields OpenAI-compatible servers put in a ``/models`` entry, best first:
# vLLM's ``max_model_len``; LM Studio's ``loaded_context_length`` (what is loaded)
# before its ``max_context_length``; OpenRouter's and others' ``context_length``.
_MODEL_ENTRY_FIELDS = (
    "max_model_len",
    "loaded_context_length",
    "context_length",
    "context_window",
    "max_context_length",
)


def _positive(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value > 0 else None


def _decode(body: bytes) -> Any:
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None


def ollama_show_window(body: bytes) -> int | None:
    """The trained context length in Ollama's ``POST /api/show`` answer:
    ``model_info["<general.architecture>.context_length"]`` (any ``*.context_length``
    when the architecture is not named)."""
    value = _decode(body)
    info = value.get("model_info") if isinstance(value, dict) else None
    if not isinstance(info, dict):
        return None
    arch = info.get("general.architecture")
    if isinstance(arch, str):
        found = _positive(info.get(f"{arch}.context_length"))
        if found:
            return found
    for key, length in info.items():
        if isinstance(key, str) and key.endswith(".context_length") and _positive(length):
            return _positive(length)
    return None


def openai_models_window(body: bytes, model: str) -> tuple[int | None, int | None]:
    """From ``GET /v1/models``: ``(window the server runs the model with, trained
    length)`` for ``model`` (or the only model listed). llama.cpp's server gives only
    ``meta.n_ctx_train`` here, the trained length: its real ``n_ctx`` is in ``/props``."""
    value = _decode(body)
    entries = value.get("data") if isinstance(value, dict) else value
    if not isinstance(entries, list):
        return None, None
    dicts = [e for e in entries if isinstance(e, dict)]
    entry = next((e for e in dicts if e.get("id") == model), None)
    if entry is None and len(dicts) == 1:
        entry = dicts[0]
    if entry is None:
        return None, None
    for name in _MODEL_ENTRY_FIELDS:
        found = _positive(entry.get(name))
        if found:
            return found, None
    meta = entry.get("meta")
    if isinstance(meta, Mapping):
        return _positive(meta.get("n_ctx")), _positive(meta.get("n_ctx_train"))
    return None, None


def llama_cpp_props_window(body: bytes) -> int | None:
    """llama.cpp's server ``GET /props``: ``default_generation_settings.n_ctx`` (the
    context a slot has), or a top-level ``n_ctx``."""
    value = _decode(body)
    if not isinstance(value, dict):
        return None
    settings = value.get("default_generation_settings")
    if isinstance(settings, dict) and _positive(settings.get("n_ctx")):
        return _positive(settings.get("n_ctx"))
    return _positive(value.get("n_ctx"))


class WindowCache:
    """Windows learnt per key (a model): a known one is kept, an unknown one (``None``
    from the lookup) is asked again after ``retry_s``."""

    def __init__(
        self, *, retry_s: float = RETRY_UNKNOWN_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._known: dict[str, int] = {}
        self._unknown_until: dict[str, float] = {}
        self._retry_s = retry_s
        self._clock = clock

    async def get(self, key: str, lookup: Callable[[], Awaitable[int | None]]) -> int | None:
        if key in self._known:
            return self._known[key]
        if self._clock() < self._unknown_until.get(key, float("-inf")):
            return None
        found = await lookup()
        if found is None:
            self._unknown_until[key] = self._clock() + self._retry_s
        else:
            self._known[key] = found
        return found
