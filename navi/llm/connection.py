"""The LLM connection an admin saves on the settings page: a type (Ollama or an
OpenAI-compatible server), a base URL and, for the latter, an API key.

The type and URL are settings events (``settings:_server``); the key never is — an event
log is copied, exported and replayed. It is kept in a file of the data folder readable by
Navi's user only (:class:`KeyFile`), shown back masked (:func:`mask_key`), and hidden
in every log line (``navi.log_redaction.hide_values``).

:func:`verify` is what the Verify button and every save do: the backend the connection
chooses, asked for its models; an :class:`~navi.llm.errors.LLMError` says exactly why
not (nothing listens, 401, not an OpenAI-compatible answer, …).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import msgspec

from navi.llm.base import LLMBackend
from navi.llm.errors import LLMError
from navi.llm.selection import select_backend
from navi.llm.settings import LLMSettings, LLMSettingsError, server_llm_settings
from navi.llm.types import ModelInfo
from navi.log_redaction import hide_values

__all__ = ["Connection", "KeyFile", "connection_settings", "mask_key", "verify"]

ConnectionType = Literal["", "ollama", "openai"]
HIDDEN_KEY = "[api key]"
# Keys shorter than this are shown as "…" alone: their ends would be most of them.
SHOWN_FROM = 12


class Connection(msgspec.Struct, frozen=True, kw_only=True):
    """``kind`` "": as the environment says; ``url`` "": the environment's URL."""

    kind: ConnectionType = ""
    url: str = ""
    api_key: str = ""


def mask_key(key: str) -> str:
    """``sk-…abcd``: enough to recognise a key, never enough to use it ("" none)."""
    if not key:
        return ""
    if len(key) < SHOWN_FROM:
        return "…"
    return f"{key[:3]}…{key[-4:]}"


def connection_settings(settings: LLMSettings, connection: Connection) -> LLMSettings:
    """``settings`` with the connection's type, URL and key (:class:`LLMSettingsError`
    for a URL that is not one, or a type the environment's embedded backend forbids)."""
    if settings.backend == "embedded" and (connection.kind or connection.url):
        raise LLMSettingsError("the embedded backend has no URL (NAVI_LLM_BACKEND=embedded)")
    changed = settings
    if connection.kind:
        changed = msgspec.structs.replace(changed, backend=connection.kind)
    if connection.kind == "openai" or (not connection.kind and settings.backend == "openai"):
        changed = msgspec.structs.replace(
            changed, openai_api_key=connection.api_key or settings.openai_api_key
        )
    return server_llm_settings(changed, connection.url)


async def verify(settings: LLMSettings) -> tuple[LLMBackend, list[ModelInfo]]:
    """The backend ``settings`` choose and the models it lists; :class:`LLMError` with
    the exact reason when it cannot be used (the backend is then closed). An
    OpenAI-compatible server without ``OPENAI_MODEL`` set serves the first model it
    lists, unless it lists the default one."""
    backend = await select_backend(settings)
    try:
        models = await backend.list_models()
    except LLMError:
        await backend.aclose()
        raise
    names = [model.name for model in models]
    unlisted = names and backend.model not in names
    if backend.name == "openai" and not settings.openai_model and unlisted:
        await backend.aclose()
        backend = await select_backend(msgspec.structs.replace(settings, openai_model=names[0]))
    return backend, models


class KeyFile:
    """The saved API key, in a file only Navi's user may read (mode 0600)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> str:
        try:
            key = self.path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return ""
        hide(key)
        return key

    def write(self, key: str) -> None:
        """Save ``key`` ("": remove the file)."""
        if not key:
            self.path.unlink(missing_ok=True)
            return
        hide(key)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temporary = self.path.with_suffix(".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(key)
        os.replace(temporary, self.path)


def hide(key: str) -> None:
    """From now on no log line shows ``key``."""
    if key:
        hide_values({key: HIDDEN_KEY})
