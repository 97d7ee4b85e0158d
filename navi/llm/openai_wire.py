"""The OpenAI chat-completions wire format as local servers speak it (SSE).

Quirks honoured, per server family (Ollama's /v1, vLLM, llama.cpp's server,
LM Studio, llama-cpp-python's server):

* ``data: {json}`` events, ``data: [DONE]`` last; ``\\r\\n`` line ends
  (sse-starlette), ``: comment`` keep-alives and ``event:`` lines are skipped;
  llama.cpp's server reports stream errors as ``error: {json}`` lines.
* Tool calls arrive as deltas joined by ``index``: ``id`` on the first delta only
  or on every delta; ``function.name`` is set once (repeated names are not
  concatenated); ``function.arguments`` fragments are concatenated.
* Reasoning is ``reasoning_content`` (llama.cpp, older vLLM) or ``reasoning``
  (newer vLLM, Ollama): either is accepted, never both added up.
* ``usage`` comes in the finish chunk, in a later chunk with empty ``choices``, or
  not at all (then the token counts are 0).
* An ``{"error": ...}`` object mid-stream is an error, and so is a stream that ends
  with neither a ``finish_reason`` nor ``[DONE]`` (llama-cpp-python answers 200 with
  an empty body when the context overflows while streaming).
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
from navi.llm.ollama_wire import strip_data_url
from navi.llm.tool_calls import stable_tool_call_id, tool_arguments
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
from navi.llm.wire_parts import encode_tool, encode_tool_call

if TYPE_CHECKING:
    from navi.llm.wire_parts import WireParts

__all__ = [
    "OpenAIStreamParser",
    "build_chat_request",
    "image_data_url",
    "openai_error",
    "parse_models",
]

# ---------------------------------------------------------------- request

_IMAGE_MAGIC = (
    ("iVBORw0KGgo", "image/png"),
    ("/9j/", "image/jpeg"),
    ("R0lGOD", "image/gif"),
    ("UklGR", "image/webp"),
)


def image_data_url(image: str) -> str:
    """A base64 image as the data URL OpenAI-style servers expect."""
    if image.startswith("data:"):
        return image
    mime = next((m for magic, m in _IMAGE_MAGIC if image.startswith(magic)), "image/png")
    return f"data:{mime};base64,{strip_data_url(image)}"


def encode_message(message: ChatMessage) -> dict[str, Any]:
    # Never None: chat templates (SmolLM2's among them) fail on a None content.
    content: Any = message.content
    if message.images:
        content = [{"type": "text", "text": message.content}] + [
            {"type": "image_url", "image_url": {"url": image_data_url(image)}}
            for image in message.images
        ]
    out: dict[str, Any] = {"role": message.role, "content": content}
    if message.tool_calls:
        out["tool_calls"] = [encode_tool_call(call) for call in message.tool_calls]
    if message.role == "tool":
        if message.tool_call_id:
            out["tool_call_id"] = message.tool_call_id
        if message.tool_name:
            out["name"] = message.tool_name
    return out


def build_chat_request(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    *,
    model: str,
    think: bool | str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    tool_choice: str | None = None,
    stream: bool = True,
    wire: WireParts | None = None,
    stop: Sequence[str] = (),
    json_format: JSONFormat | None = None,
) -> dict[str, Any]:
    """The request body; with ``wire``, its messages and tools come pre-encoded (the
    same JSON once encoded)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": (
            [encode_message(message) for message in messages]
            if wire is None
            else wire.messages(messages)
        ),
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = [encode_tool(tool) for tool in tools] if wire is None else wire.tools(tools)
        if tool_choice in ("auto", "none", "required"):
            body["tool_choice"] = tool_choice
        elif tool_choice:
            body["tool_choice"] = {"type": "function", "function": {"name": tool_choice}}
    if temperature is not None:
        body["temperature"] = temperature
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    # Only a level has a portable spelling; on/off switches differ per server.
    if isinstance(think, str):
        body["reasoning_effort"] = think
    if stop:
        body["stop"] = list(stop)
    if json_format is not None:
        body["response_format"] = response_format(json_format)
    return body


def response_format(json_format: JSONFormat) -> dict[str, Any]:
    """OpenAI's ``response_format`` for a JSON answer."""
    if json_format.schema is None:
        return {"type": "json_object"}
    schema: dict[str, Any] = {"name": json_format.name, "schema": json_format.schema}
    if json_format.strict is not None:
        schema["strict"] = json_format.strict
    return {"type": "json_schema", "json_schema": schema}


# ---------------------------------------------------------------- response


class _FunctionDelta(msgspec.Struct, gc=False):
    name: str | None = None
    arguments: str | dict[str, Any] | None = None


class _ToolCallDelta(msgspec.Struct, gc=False):
    index: int | None = None
    id: str | None = None
    function: _FunctionDelta | None = None


class _Delta(msgspec.Struct, gc=False):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_ToolCallDelta] | None = None


class _Choice(msgspec.Struct, gc=False):
    index: int = 0
    delta: _Delta | None = None
    # Non-streaming answers carry ``message`` instead of ``delta``.
    message: _Delta | None = None
    finish_reason: str | None = None


class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0


class _Event(msgspec.Struct, gc=False):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: Any = None


_events = msgspec.json.Decoder(_Event)


class _PendingCall:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name = ""
        self.arguments: list[str] | dict[str, Any] = []


class OpenAIStreamParser:
    """Turns blocks of SSE lines into chunks. One parser per response."""

    __slots__ = (
        "_done",
        "_error",
        "_finish_reason",
        "_pending",
        "_tool_calls_seen",
        "_usage",
        "url",
    )

    def __init__(self, url: str = "") -> None:
        self.url = url
        self._pending: dict[int, _PendingCall] = {}
        self._tool_calls_seen = 0
        self._finish_reason: str | None = None
        self._usage: _Usage | None = None
        self._done = False
        self._error: LLMError | None = None

    def feed(self, block: bytes) -> list[StreamChunk]:
        """The chunks in ``block`` (whole lines). An error ends the batch: the chunks
        before it are returned, and :meth:`raise_pending` raises it."""
        out: list[StreamChunk] = []
        if not block:
            return out
        try:
            for line in block.split(b"\n"):
                if line[:5] == b"data:":
                    payload = line[5:].strip()
                    if not payload:
                        continue
                    if payload == b"[DONE]":
                        self._done = True
                        continue
                    self._event(self._decode(payload), out)
                elif line[:6] == b"error:":
                    raise StreamError(_error_line_text(line[6:].strip()), url=self.url)
        except LLMError as exc:
            self._error = exc
        return out

    def raise_pending(self) -> None:
        """Raise the error found by the last :meth:`feed`, if any."""
        if self._error is not None:
            raise self._error

    def feed_completion(self, body: bytes) -> list[StreamChunk]:
        """A whole non-streaming answer (from a server that ignored ``stream: true``)."""
        if not body.strip():
            raise IncompleteStream("the server answered with an empty body", url=self.url)
        out: list[StreamChunk] = []
        self._event(self._decode(body), out)
        self._finish_reason = self._finish_reason or "stop"
        return out + self.finish()

    def finish(self) -> list[StreamChunk]:
        """Called at the end of the body: pending tool calls, then the final chunk."""
        self.raise_pending()
        if self._finish_reason is None and not self._done:
            raise IncompleteStream(
                "the stream ended with neither a finish_reason nor [DONE] (this is how "
                "some servers report a prompt longer than their context window)",
                url=self.url,
            )
        out: list[StreamChunk] = []
        self._flush_tool_calls(out)
        reason = self._finish_reason or "stop"
        if self._tool_calls_seen and reason == "stop":
            reason = "tool_calls"
        usage = self._usage
        out.append(
            FinalChunk(
                finish_reason=reason,
                prompt_tokens=(usage.prompt_tokens or 0) if usage else 0,
                completion_tokens=(usage.completion_tokens or 0) if usage else 0,
            )
        )
        return out

    def _decode(self, payload: bytes) -> _Event:
        try:
            return _events.decode(payload)
        except msgspec.DecodeError as exc:
            shown = payload[:200].decode("utf-8", "replace")
            raise StreamError(
                f"the server sent an event that is not valid ({exc}): {shown}", url=self.url
            ) from None

    def _event(self, event: _Event, out: list[StreamChunk]) -> None:
        if event.error is not None:
            raise StreamError(error_text(event.error), url=self.url)
        if event.usage is not None:
            self._usage = event.usage
        if not event.choices:
            return
        for choice in event.choices:
            if choice.index != 0:
                continue
            delta = choice.delta or choice.message
            if delta is not None:
                reasoning = delta.reasoning_content or delta.reasoning
                if reasoning:
                    out.append(ThinkingPiece(reasoning))
                if delta.content:
                    out.append(TextPiece(delta.content))
                if delta.tool_calls:
                    self._merge(delta.tool_calls)
            if choice.finish_reason:
                self._finish_reason = choice.finish_reason
                self._flush_tool_calls(out)

    def _merge(self, deltas: list[_ToolCallDelta]) -> None:
        for delta in deltas:
            index = delta.index
            if index is None:
                # No index (rare servers): a new id starts a new call, else continue the last.
                last = max(self._pending) if self._pending else -1
                last_id = self._pending[last].id if last >= 0 else None
                new_call = last < 0 or (delta.id is not None and delta.id != last_id)
                index = last + 1 if new_call else last
            call = self._pending.get(index)
            if call is None:
                call = self._pending[index] = _PendingCall()
            if delta.id and call.id is None:
                call.id = delta.id
            function = delta.function
            if function is None:
                continue
            if function.name and not call.name:
                call.name = function.name
            arguments = function.arguments
            if isinstance(arguments, dict):
                call.arguments = arguments
            elif arguments and isinstance(call.arguments, list):
                call.arguments.append(arguments)

    def _flush_tool_calls(self, out: list[StreamChunk]) -> None:
        if not self._pending:
            return
        calls = []
        for index in sorted(self._pending):
            pending = self._pending[index]
            raw = pending.arguments
            arguments = tool_arguments(pending.name, raw if isinstance(raw, dict) else "".join(raw))
            call_id = pending.id or stable_tool_call_id(
                self._tool_calls_seen, pending.name, arguments
            )
            self._tool_calls_seen += 1
            calls.append(ToolCall(id=call_id, name=pending.name, arguments=arguments))
        self._pending.clear()
        out.append(ToolCallsChunk(tuple(calls)))


def _error_line_text(payload: bytes) -> str:
    try:
        value = msgspec.json.decode(payload)
    except msgspec.DecodeError:
        return payload.decode("utf-8", "replace")
    if isinstance(value, dict) and "error" in value:
        value = value["error"]
    return error_text(value)


# ---------------------------------------------------------------- errors and model lists

_NO_TOOLS = (
    "does not support tools",
    "tool choice requires",
    "tools param requires",
    "tool-call-parser",
    "tools are not supported",
)


def openai_error(status: int, body: bytes, *, model: str, url: str) -> LLMError:
    detail = error_detail(body)
    lowered = detail.lower()
    if status == 404 and "model" in lowered:
        return ModelNotFound(
            model,
            server=f"the OpenAI-compatible server at {url}",
            how_to_get=f"Check the model name ({url}/models lists the models it serves).",
        )
    if any(marker in lowered for marker in _NO_TOOLS):
        return ToolsNotSupported(model, detail=detail)
    if "does not support thinking" in lowered:
        return ThinkingNotSupported(model, detail=detail)
    if status == 404:
        detail += f" (is OPENAI_BASE_URL={url} right? It usually ends in /v1)"
    return LLMServerError(status, detail, url=url)


class _Model(msgspec.Struct):
    id: str
    owned_by: str | None = None


class _Models(msgspec.Struct):
    data: list[_Model] = []


def parse_models(body: bytes) -> list[ModelInfo]:
    """``GET /v1/models`` → the models; raises ``msgspec.DecodeError`` on a foreign body."""
    models = msgspec.json.decode(body, type=_Models)
    return [
        ModelInfo(name=model.id, details={"owned_by": model.owned_by} if model.owned_by else {})
        for model in models.data
    ]
