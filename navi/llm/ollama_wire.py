"""Ollama's ``/api/chat`` wire format: the request we send, the NDJSON we parse.

Facts honoured (checked against real servers): one JSON object per line; thinking
arrives as ``message.thinking`` with empty ``content``; each tool call arrives
complete in one chunk with ``function.arguments`` as a JSON object (newer servers
add ``id`` and ``function.index``, older ones neither); ``done_reason``,
``prompt_eval_count`` and ``eval_count`` come only on the ``done: true`` line; an
error mid-stream is one extra ``{"error": ...}`` line with status 200.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from navi.llm.errors import (
    IncompleteStream,
    LLMError,
    LLMServerError,
    ModelNotFound,
    StreamError,
    ThinkingNotSupported,
    ToolsNotSupported,
)
from navi.llm.http import error_detail, error_text
from navi.llm.tool_calls import stable_tool_call_id, tool_arguments
from navi.llm.wire_parts import encode_tool

if TYPE_CHECKING:
    from navi.llm.wire_parts import WireParts
from navi.llm.types import (
    ChatMessage,
    FinalChunk,
    JSONFormat,
    ModelInfo,
    StreamChunk,
    TextPiece,
    ThinkingPiece,
    ToolCall,
    ToolCallsChunk,
    ToolSpec,
)

__all__ = [
    "OllamaStreamParser",
    "build_chat_request",
    "ollama_error",
    "parse_tags",
    "strip_data_url",
]


# ---------------------------------------------------------------- request


def strip_data_url(image: str) -> str:
    """``data:image/png;base64,AAA`` → ``AAA``; plain base64 is returned as is."""
    if image.startswith("data:"):
        _, _, payload = image.partition(",")
        return payload
    return image


def encode_message(message: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.images:
        out["images"] = [strip_data_url(image) for image in message.images]
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "function": {"index": index, "name": call.name, "arguments": call.arguments},
            }
            for index, call in enumerate(message.tool_calls)
        ]
    if message.role == "tool" and message.tool_name:
        out["tool_name"] = message.tool_name
    return out


def offered_tools(tools: Sequence[ToolSpec], tool_choice: str | None) -> Sequence[ToolSpec]:
    """Ollama has no ``tool_choice``: "none" offers no tool, a name offers only that one."""
    if not tools or tool_choice in (None, "auto", "required"):
        return tools
    if tool_choice == "none":
        return ()
    return [tool for tool in tools if tool.name == tool_choice] or tools


def build_chat_request(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    *,
    model: str,
    num_ctx: int,
    think: bool | str | None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    keep_alive: str | int | None = None,
    tool_choice: str | None = None,
    stream: bool = True,
    wire: WireParts | None = None,
    stop: Sequence[str] = (),
    json_format: JSONFormat | None = None,
) -> dict[str, Any]:
    """The request body; with ``wire``, its messages and tools come pre-encoded (the
    same JSON once encoded). ``json_format`` is Ollama's ``format``: ``"json"`` or
    the schema."""
    options: dict[str, Any] = {"num_ctx": num_ctx}
    if temperature is not None:
        options["temperature"] = temperature
    if max_tokens is not None:
        options["num_predict"] = max_tokens
    if stop:
        options["stop"] = list(stop)
    body: dict[str, Any] = {
        "model": model,
        "messages": (
            [encode_message(message) for message in messages]
            if wire is None
            else wire.messages(messages)
        ),
        "stream": stream,
        "options": options,
    }
    offered = offered_tools(tools, tool_choice)
    if offered:
        body["tools"] = (
            [encode_tool(tool) for tool in offered] if wire is None else wire.tools(offered)
        )
    if think is not None:
        body["think"] = think
    if keep_alive is not None:
        body["keep_alive"] = keep_alive
    if json_format is not None:
        body["format"] = "json" if json_format.schema is None else json_format.schema
    return body


# ---------------------------------------------------------------- response


class _Function(msgspec.Struct, gc=False):
    name: str = ""
    # An object on every Ollama we know; a JSON string is tolerated for proxies.
    arguments: dict[str, Any] | str = {}
    index: int | None = None


class _ToolCall(msgspec.Struct, gc=False):
    function: _Function
    id: str | None = None


class _Message(msgspec.Struct, gc=False):
    content: str = ""
    thinking: str = ""
    tool_calls: list[_ToolCall] | None = None


class _Chunk(msgspec.Struct, gc=False):
    message: _Message | None = None
    done: bool = False
    done_reason: str | None = None
    prompt_eval_count: int = 0
    eval_count: int = 0
    error: Any = None


_chunks = msgspec.json.Decoder(_Chunk)


class OllamaStreamParser:
    """Turns blocks of NDJSON lines into chunks. One parser per response."""

    __slots__ = ("_error", "_final", "_tool_calls_seen", "url")

    def __init__(self, url: str = "") -> None:
        self.url = url
        self._tool_calls_seen = 0
        self._final: FinalChunk | None = None
        self._error: LLMError | None = None

    def feed(self, block: bytes) -> list[StreamChunk]:
        """The chunks in ``block`` (whole lines). An error line or a bad line ends the
        batch: the chunks before it are returned, and :meth:`raise_pending` raises it."""
        out: list[StreamChunk] = []
        if not block:
            return out
        try:
            chunks = _chunks.decode_lines(block)
        except msgspec.DecodeError:
            chunks = self._decode_until_bad_line(block)
        for chunk in chunks:
            if chunk.error is not None:
                self._error = StreamError(error_text(chunk.error), url=self.url)
                break
            message = chunk.message
            if message is not None:
                if message.thinking:
                    out.append(ThinkingPiece(message.thinking))
                if message.content:
                    out.append(TextPiece(message.content))
                if message.tool_calls:
                    out.append(ToolCallsChunk(self._tool_calls(message.tool_calls)))
            if chunk.done:
                reason = chunk.done_reason or "stop"
                if self._tool_calls_seen and reason == "stop":
                    reason = "tool_calls"
                self._final = FinalChunk(
                    finish_reason=reason,
                    prompt_tokens=chunk.prompt_eval_count,
                    completion_tokens=chunk.eval_count,
                )
        return out

    def raise_pending(self) -> None:
        """Raise the error found by the last :meth:`feed`, if any."""
        if self._error is not None:
            raise self._error

    def finish(self) -> list[StreamChunk]:
        """Called at the end of the body: the final chunk, or why there is none."""
        self.raise_pending()
        if self._final is None:
            raise IncompleteStream("the stream ended without its done line", url=self.url)
        return [self._final]

    def _decode_until_bad_line(self, block: bytes) -> list[_Chunk]:
        good = []
        for line in block.split(b"\n"):
            if not line.strip():
                continue
            try:
                good.append(_chunks.decode(line))
            except msgspec.DecodeError as exc:
                shown = line[:200].decode("utf-8", "replace")
                self._error = StreamError(
                    f"the server sent a line that is not valid ({exc}): {shown}", url=self.url
                )
                break
        return good

    def _tool_calls(self, raw_calls: list[_ToolCall]) -> tuple[ToolCall, ...]:
        calls = []
        for raw in raw_calls:
            function = raw.function
            arguments = tool_arguments(function.name, function.arguments)
            call_id = raw.id or stable_tool_call_id(self._tool_calls_seen, function.name, arguments)
            self._tool_calls_seen += 1
            calls.append(ToolCall(id=call_id, name=function.name, arguments=arguments))
        return tuple(calls)


# ---------------------------------------------------------------- errors and model lists


def ollama_error(status: int, body: bytes, *, model: str, url: str) -> LLMError:
    """Turn an HTTP error answer from Ollama into the error a user understands."""
    detail = error_detail(body)
    lowered = detail.lower()
    if status == 404 and "not found" in lowered:
        return ModelNotFound(
            model,
            server=f"the Ollama server at {url}",
            how_to_get=f"Get it with: ollama pull {model}",
        )
    if "does not support tools" in lowered:
        return ToolsNotSupported(model, detail=detail)
    if "does not support thinking" in lowered:
        return ThinkingNotSupported(model, detail=detail)
    return LLMServerError(status, detail, url=url)


class _Tag(msgspec.Struct):
    name: str = ""
    model: str = ""
    size: int | None = None
    details: dict[str, Any] = {}


class _Tags(msgspec.Struct):
    models: list[_Tag] = []


def parse_tags(body: bytes) -> list[ModelInfo]:
    """``GET /api/tags`` → the models; raises ``msgspec.DecodeError`` on a foreign body."""
    tags = msgspec.json.decode(body, type=_Tags)
    return [
        ModelInfo(name=tag.name or tag.model, size_bytes=tag.size, details=tag.details)
        for tag in tags.models
    ]
