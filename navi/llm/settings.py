"""LLM settings, read from the environment (the app's config embeds this struct).

| variable | default | meaning |
|---|---|---|
| ``NAVI_LLM_BACKEND`` | ``auto`` | ``auto`` (Ollama if it answers, else embedded), |
| | | ``ollama``, ``openai`` or ``embedded`` |
| ``OLLAMA_HOST`` | ``http://localhost:11434`` | Ollama server (scheme and port optional) |
| ``OLLAMA_DEFAULT_MODEL`` | ``gemma4:e2b-it-q8_0`` | model when a profile names none; set, |
| | | it is pinned (else an installed model may stand in) |
| ``OLLAMA_NUM_CTX`` | ``65536`` | context window in tokens |
| ``OLLAMA_THINK`` | ``true`` | ``true``/``false`` or a level ``low``/``medium``/``high`` |
| ``OPENAI_BASE_URL`` | ``http://localhost:8080/v1`` | OpenAI-compatible server (``/v1`` |
| | | is added to a URL without a path) |
| ``OPENAI_API_KEY`` | empty | sent as a bearer token when set |
| ``OPENAI_MODEL`` | empty | the OpenAI backend's model (else ``OLLAMA_DEFAULT_MODEL``) |
| ``NAVI_EMBEDDED_MODEL`` | empty | a GGUF for the embedded backend (else the packaged SmolLM2) |
| ``NAVI_EMBEDDED_N_CTX`` | ``8192`` | the embedded model's context window |
| ``NAVI_EMBEDDED_THREADS`` | ``0`` | threads for the embedded model (0: half the cores) |
| ``NAVI_EMBEDDED_MAX_TOKENS`` | ``512`` | the embedded model's answer cap, when a call sets none |
| ``NAVI_LLM_REPROBE_SECONDS`` | ``30`` | ``auto`` on the embedded model: how often Ollama is |
| | | asked again (before a new turn) |
| ``LLM_STREAM_FIRST_CHUNK_TIMEOUT`` | ``120`` | seconds to wait for the first chunk |
| ``LLM_STREAM_CHUNK_TIMEOUT`` | ``60`` | seconds allowed between chunks |
| ``LLM_CONNECT_TIMEOUT`` | ``10`` | seconds to open a connection |
| ``NAVI_LLM_MAX_CONNECTIONS`` | ``512`` | connections to one LLM server at once (each |
| | | streaming call holds one; see docs/llm.md) |
| ``NAVI_LLM_POOL_TIMEOUT`` | ``60`` | seconds a call waits for one of them before it |
| | | fails with a clear (retryable) error |
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

import msgspec

__all__ = [
    "BackendKind",
    "LLMSettings",
    "LLMSettingsError",
    "normalize_ollama_host",
    "server_llm_settings",
]

BackendKind = Literal["auto", "ollama", "openai", "embedded"]
BACKEND_KINDS: tuple[BackendKind, ...] = ("auto", "ollama", "openai", "embedded")
THINK_LEVELS = ("low", "medium", "high")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

T = TypeVar("T")


class LLMSettingsError(ValueError):
    """A setting has a value Navi cannot use; the message names the variable."""


class LLMSettings(msgspec.Struct, frozen=True, kw_only=True):
    backend: BackendKind = "auto"
    ollama_host: str = "http://localhost:11434"
    default_model: str = "gemma4:e2b-it-q8_0"
    # The operator set OLLAMA_DEFAULT_MODEL: Navi never uses another model instead.
    model_pinned: bool = False
    num_ctx: int = 65536
    think: bool | str = True
    openai_base_url: str = "http://localhost:8080/v1"
    openai_api_key: str = ""
    openai_model: str = ""
    embedded_model_path: str = ""
    embedded_n_ctx: int = 8192
    embedded_threads: int = 0
    embedded_max_tokens: int = 512
    reprobe_seconds: float = 30.0
    first_chunk_timeout: float = 120.0
    chunk_timeout: float = 60.0
    connect_timeout: float = 10.0
    # As many as Ollama queues before it answers 503 (OLLAMA_MAX_QUEUE's default).
    max_connections: int = 512
    # Below the first-chunk timeout, so that a full pool is the error a user sees.
    pool_timeout: float = 60.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> LLMSettings:
        """Read the settings; raise :class:`LLMSettingsError` naming any bad variable."""
        env = {k: v.strip() for k, v in environ.items()}
        defaults = cls()

        def get(name: str, parse: Callable[[str, str], T], default: T) -> T:
            raw = env.get(name, "")
            return parse(name, raw) if raw else default

        return cls(
            backend=get("NAVI_LLM_BACKEND", _parse_backend, defaults.backend),
            ollama_host=get("OLLAMA_HOST", _parse_ollama_host, defaults.ollama_host),
            default_model=env.get("OLLAMA_DEFAULT_MODEL") or defaults.default_model,
            model_pinned=bool(env.get("OLLAMA_DEFAULT_MODEL")),
            num_ctx=get("OLLAMA_NUM_CTX", _positive_int, defaults.num_ctx),
            think=get("OLLAMA_THINK", _parse_think, defaults.think),
            openai_base_url=get("OPENAI_BASE_URL", _parse_openai_url, defaults.openai_base_url),
            openai_api_key=env.get("OPENAI_API_KEY", ""),
            openai_model=env.get("OPENAI_MODEL", ""),
            embedded_model_path=env.get("NAVI_EMBEDDED_MODEL", ""),
            embedded_n_ctx=get("NAVI_EMBEDDED_N_CTX", _positive_int, defaults.embedded_n_ctx),
            embedded_threads=get("NAVI_EMBEDDED_THREADS", _natural_int, defaults.embedded_threads),
            embedded_max_tokens=get(
                "NAVI_EMBEDDED_MAX_TOKENS", _positive_int, defaults.embedded_max_tokens
            ),
            reprobe_seconds=get(
                "NAVI_LLM_REPROBE_SECONDS", _positive_float, defaults.reprobe_seconds
            ),
            first_chunk_timeout=get(
                "LLM_STREAM_FIRST_CHUNK_TIMEOUT", _positive_float, defaults.first_chunk_timeout
            ),
            chunk_timeout=get("LLM_STREAM_CHUNK_TIMEOUT", _positive_float, defaults.chunk_timeout),
            connect_timeout=get("LLM_CONNECT_TIMEOUT", _positive_float, defaults.connect_timeout),
            max_connections=get(
                "NAVI_LLM_MAX_CONNECTIONS", _positive_int, defaults.max_connections
            ),
            pool_timeout=get("NAVI_LLM_POOL_TIMEOUT", _positive_float, defaults.pool_timeout),
        )


def _bad(name: str, raw: str, expected: str) -> LLMSettingsError:
    return LLMSettingsError(f"{name}={raw!r} is not valid: expected {expected}.")


def _parse_backend(name: str, raw: str) -> BackendKind:
    value = raw.lower()
    for kind in BACKEND_KINDS:
        if value == kind:
            return kind
    raise _bad(name, raw, "one of " + ", ".join(BACKEND_KINDS))


def _positive_int(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise _bad(name, raw, "a whole number") from None
    if value <= 0:
        raise _bad(name, raw, "a number above 0")
    return value


def _natural_int(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise _bad(name, raw, "a whole number") from None
    if value < 0:
        raise _bad(name, raw, "0 or more")
    return value


def _positive_float(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise _bad(name, raw, "a number of seconds") from None
    if not value > 0:
        raise _bad(name, raw, "a number of seconds above 0")
    return value


def _parse_think(name: str, raw: str) -> bool | str:
    value = raw.lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    if value in THINK_LEVELS:
        return value
    raise _bad(name, raw, "true, false, low, medium or high")


def _parse_ollama_host(name: str, raw: str) -> str:
    try:
        return normalize_ollama_host(raw)
    except ValueError:
        raise _bad(name, raw, "a host, host:port or URL such as http://localhost:11434") from None


def normalize_ollama_host(raw: str) -> str:
    """``localhost``, ``0.0.0.0:11434``, ``http://h:1`` → ``http://host:port`` (as ollama does)."""
    text = raw.strip().rstrip("/")
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(raw)
    port = parts.port  # raises ValueError on a bad port
    host = parts.hostname
    # 0.0.0.0 is how a server is told to listen everywhere; a client must connect locally.
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    if port is None:
        port = 443 if parts.scheme == "https" and "://" in raw else 11434
    return urlunsplit((parts.scheme, f"{host}:{port}", parts.path, "", ""))


def _parse_openai_url(name: str, raw: str) -> str:
    text = raw.strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _bad(name, raw, "a URL such as http://localhost:8080/v1")
    try:
        _ = parts.port
    except ValueError:
        raise _bad(name, raw, "a URL with a valid port") from None
    if parts.path in ("", "/"):
        text += "/v1"
    return text


def server_llm_settings(settings: LLMSettings, url: str) -> LLMSettings:
    """The settings with the LLM server at ``url`` ("": as they are): OpenAI's base URL
    for ``NAVI_LLM_BACKEND=openai``, else Ollama's host. :class:`LLMSettingsError` if
    ``url`` is not such a URL."""
    if not url:
        return settings
    if settings.backend == "openai":
        return msgspec.structs.replace(
            settings, openai_base_url=_parse_openai_url("the backend URL", url)
        )
    return msgspec.structs.replace(settings, ollama_host=_parse_ollama_host("the backend URL", url))
