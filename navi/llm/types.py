"""The neutral vocabulary every LLM backend speaks: messages, tools, options, chunks.

Backends translate these to and from their wire formats; nothing above ``navi.llm``
ever sees a wire format.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from events.types import ToolCall

__all__ = [
    "ChatMessage",
    "Completion",
    "FinalChunk",
    "JSONFormat",
    "LLMOptions",
    "ModelInfo",
    "Role",
    "StreamChunk",
    "TextPiece",
    "ThinkingPiece",
    "ToolCall",
    "ToolCallsChunk",
    "ToolSpec",
]

Role = Literal["system", "user", "assistant", "tool"]


class ChatMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One message of the context the LLM sees.

    ``images`` are base64 strings; a ``data:...;base64,`` prefix is tolerated and
    stripped on the wire. A tool result names its call (``tool_call_id``) and its tool
    (``tool_name``): OpenAI-style servers need the first, Ollama the second.
    """

    role: Role
    content: str = ""
    images: tuple[str, ...] = ()
    thinking: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool offered to the LLM: its name, what it does, its JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


class JSONFormat(msgspec.Struct, frozen=True, kw_only=True):
    """The answer must be JSON: any JSON object (``schema`` None) or one that matches
    ``schema`` (its ``name`` and ``strict`` as OpenAI's ``json_schema`` has them)."""

    schema: dict[str, Any] | None = None
    name: str = "answer"
    strict: bool | None = None

    @classmethod
    def of(cls, response_format: dict[str, Any] | None) -> JSONFormat | None:
        """From OpenAI's ``response_format`` (checked where it came in): None for
        ``text`` or none."""
        kind = (response_format or {}).get("type")
        if kind == "json_object":
            return cls()
        if kind != "json_schema":
            return None
        spec = (response_format or {}).get("json_schema") or {}
        return cls(
            schema=spec.get("schema") or {},
            name=spec.get("name") or "answer",
            strict=spec.get("strict"),
        )


class LLMOptions(msgspec.Struct, frozen=True, kw_only=True):
    """Per-call options; ``None`` means "the backend's / the settings' default".

    ``think`` is a bool or a level (``"low"``, ``"medium"``, ``"high"``).
    ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"`` or the name of one tool.
    ``stop``: the sequences that end the answer; ``json_format``: the answer is JSON,
    through the server's structured output (Ollama ``format``, OpenAI
    ``response_format``, llama.cpp's grammar).
    """

    model: str | None = None
    temperature: float | None = None
    num_ctx: int | None = None
    think: bool | str | None = None
    keep_alive: str | int | None = None
    tool_choice: str | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    json_format: JSONFormat | None = None


# ---------------------------------------------------------------- stream chunks
# gc=False: these are tiny, short-lived and hold no cycles; thousands per second
# go through the parser, so skipping GC tracking is a measurable saving.


class ThinkingPiece(msgspec.Struct, frozen=True, gc=False):
    """A piece of the model's reasoning."""

    text: str


class TextPiece(msgspec.Struct, frozen=True, gc=False):
    """A piece of the answer's text."""

    text: str


class ToolCallsChunk(msgspec.Struct, frozen=True):
    """One or more complete tool calls (arguments fully parsed)."""

    calls: tuple[ToolCall, ...]


class FinalChunk(msgspec.Struct, frozen=True, kw_only=True):
    """The last chunk of every stream that ends normally or by a stop.

    ``finish_reason`` is ``"stop"``, ``"length"``, ``"tool_calls"`` (whenever the
    stream carried tool calls), ``"stopped"`` (a :class:`~navi.llm.stop.StopSignal`
    ended it) or whatever other reason the server gave.
    """

    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0


StreamChunk = ThinkingPiece | TextPiece | ToolCallsChunk | FinalChunk


class Completion(msgspec.Struct, frozen=True, kw_only=True):
    """The whole result of a call, as returned by ``complete()``."""

    content: str = ""
    thinking: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""


class ModelInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A model a server offers (for the model picker and ``navi doctor``)."""

    name: str
    size_bytes: int | None = None
    details: dict[str, Any] = {}
