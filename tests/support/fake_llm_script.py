"""What a scripted reply of the fake LLM server is, and how it becomes wire bytes.

A :class:`Reply` says *what* the model answers (thinking, text, tool calls) and
*how* the server misbehaves (delays, stalls, drops, errors, wire quirks). The
renderers turn it into the exact bytes Ollama (NDJSON) or an OpenAI-compatible
server (SSE) would send. "Chunks" below always means the wire events before the
final one (thinking pieces, text pieces, tool-call events), counted from 0.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import msgspec

__all__ = ["FakeToolCall", "Rendered", "Reply", "render_ollama", "render_openai"]

_encode = msgspec.json.Encoder().encode
_WORDS = re.compile(r"\s*\S+\s*|\s+")
CREATED_AT = "2025-01-01T00:00:00.000000Z"
CREATED = 1735689600


class FakeToolCall(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    arguments: dict[str, Any] = {}
    # None: the fake makes a deterministic id (unless the reply says tool_call_ids="none").
    id: str | None = None


class Reply(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One scripted answer, consumed by one chat request.

    Content:
      ``text`` / ``thinking``: a string (split into word pieces) or the exact pieces.
      ``tool_calls``: complete calls; ``finish_reason`` defaults to ``"stop"``
      (``"tool_calls"`` on the OpenAI wire when there are calls).
    Timing and failures:
      ``delay_first``: silent seconds before anything (status line included), like a
      long prefill. ``delay``: seconds between chunks. ``stall_after=N``: after N
      chunks, go silent until the client hangs up. ``drop_after=N``: after N chunks,
      close the connection mid-body. ``end_after=N``: after N chunks, end the body
      cleanly but with no final chunk / ``[DONE]``.
      ``error_before``: answer HTTP ``error_status`` with this error message instead
      (``{model}`` is replaced by the requested model). ``error_during``: after
      ``error_after`` chunks (default: all), send an error object with status 200 and
      end. ``empty_body``: status 200 and an empty body. ``raw_body``: status 200 and
      exactly this body.
    Wire quirks:
      ``tool_call_ids``: OpenAI: the id on the ``"first"`` delta only or on
      ``"every"`` delta (which also repeats the name); ``"none"``: no ids at all (on
      Ollama: an old server, no ``id`` nor ``function.index``, all calls in one
      chunk). ``argument_pieces``: OpenAI: fragments per call's arguments.
      ``reasoning_field``: OpenAI: ``reasoning_content`` or ``reasoning``.
      ``usage``: OpenAI: in the ``"final"`` chunk, in a ``"separate"`` chunk with
      empty choices, or ``"none"``.
    """

    text: str | list[str] = ""
    thinking: str | list[str] = ""
    tool_calls: list[FakeToolCall] = []
    finish_reason: str | None = None
    prompt_tokens: int = 10
    completion_tokens: int | None = None
    delay_first: float = 0.0
    delay: float = 0.0
    stall_after: int | None = None
    drop_after: int | None = None
    end_after: int | None = None
    error_before: str | None = None
    error_status: int = 500
    error_during: str | None = None
    error_after: int | None = None
    empty_body: bool = False
    raw_body: str | None = None
    tool_call_ids: Literal["first", "every", "none"] = "first"
    argument_pieces: int = 3
    reasoning_field: Literal["reasoning_content", "reasoning"] = "reasoning_content"
    usage: Literal["final", "separate", "none"] = "final"

    # ---- the errors real servers give, with their real wording

    @classmethod
    def model_not_found(cls, **kwargs: Any) -> Reply:
        return cls(
            error_before='model "{model}" not found, try pulling it first',
            error_status=404,
            **kwargs,
        )

    @classmethod
    def no_tools(cls, **kwargs: Any) -> Reply:
        return cls(
            error_before="registry.ollama.ai/library/{model} does not support tools",
            error_status=400,
            **kwargs,
        )

    @classmethod
    def no_thinking(cls, **kwargs: Any) -> Reply:
        return cls(error_before='"{model}" does not support thinking', error_status=400, **kwargs)

    # ---- derived facts

    def text_pieces(self) -> list[str]:
        return _pieces(self.text)

    def thinking_pieces(self) -> list[str]:
        return _pieces(self.thinking)

    def completion_token_count(self) -> int:
        if self.completion_tokens is not None:
            return self.completion_tokens
        return len(self.text_pieces()) + len(self.thinking_pieces()) + len(self.tool_calls)

    def call_id(self, request_number: int, index: int) -> str | None:
        call = self.tool_calls[index]
        if self.tool_call_ids == "none":
            return None
        return call.id or f"call_{request_number}_{index}"


def _pieces(value: str | list[str]) -> list[str]:
    if isinstance(value, list):
        return value
    return _WORDS.findall(value)


class Rendered(msgspec.Struct, kw_only=True):
    """A reply as wire bytes: ``chunks`` (cut points count these), then ``tail``."""

    content_type: str
    chunks: list[bytes]
    tail: list[bytes]


# ---------------------------------------------------------------- Ollama /api/chat


def render_ollama(reply: Reply, *, model: str, request_number: int) -> Rendered:
    head = b'{"model":' + _encode(model) + b',"created_at":"' + CREATED_AT.encode() + b'",'
    chunks: list[bytes] = []
    thinking_prefix = head + b'"message":{"role":"assistant","content":"","thinking":'
    for piece in reply.thinking_pieces():
        chunks.append(thinking_prefix + _encode(piece) + b'},"done":false}\n')
    text_prefix = head + b'"message":{"role":"assistant","content":'
    for piece in reply.text_pieces():
        chunks.append(text_prefix + _encode(piece) + b'},"done":false}\n')
    calls = [
        (index, call, reply.call_id(request_number, index))
        for index, call in enumerate(reply.tool_calls)
    ]
    if calls and reply.tool_call_ids == "none":  # an old server: no id, no index, one chunk
        wire = [{"function": {"name": c.name, "arguments": c.arguments}} for _, c, _ in calls]
        chunks.append(_ollama_message(head, {"tool_calls": wire}))
    else:
        for index, call, call_id in calls:
            wire_call = {
                "id": call_id,
                "function": {"index": index, "name": call.name, "arguments": call.arguments},
            }
            chunks.append(_ollama_message(head, {"tool_calls": [wire_call]}))
    if reply.error_during is not None:
        cut = len(chunks) if reply.error_after is None else reply.error_after
        error = {"error": reply.error_during.replace("{model}", model)}
        return Rendered(
            content_type="application/x-ndjson",
            chunks=chunks[:cut],
            tail=[_encode(error) + b"\n"],
        )
    final = {
        "model": model,
        "created_at": CREATED_AT,
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": reply.finish_reason or "stop",
        "total_duration": 1_000_000,
        "load_duration": 100_000,
        "prompt_eval_count": reply.prompt_tokens,
        "prompt_eval_duration": 200_000,
        "eval_count": reply.completion_token_count(),
        "eval_duration": 700_000,
    }
    return Rendered(
        content_type="application/x-ndjson", chunks=chunks, tail=[_encode(final) + b"\n"]
    )


def _ollama_message(head: bytes, fields: dict[str, Any]) -> bytes:
    message = {"role": "assistant", "content": "", **fields}
    return head + b'"message":' + _encode(message) + b',"done":false}\n'


def ollama_whole(reply: Reply, *, model: str, request_number: int) -> dict[str, Any]:
    """The same reply as a ``stream: false`` answer."""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.text_pieces())}
    if reply.thinking_pieces():
        message["thinking"] = "".join(reply.thinking_pieces())
    if reply.tool_calls:
        message["tool_calls"] = [
            {"function": {"name": c.name, "arguments": c.arguments}}
            | ({"id": i} if (i := reply.call_id(request_number, n)) else {})
            for n, c in enumerate(reply.tool_calls)
        ]
    return {
        "model": model,
        "created_at": CREATED_AT,
        "message": message,
        "done": True,
        "done_reason": reply.finish_reason or "stop",
        "prompt_eval_count": reply.prompt_tokens,
        "eval_count": reply.completion_token_count(),
    }


def ollama_error_body(message: str) -> dict[str, Any]:
    return {"error": message}


# ---------------------------------------------------------------- OpenAI /v1/chat/completions


def render_openai(reply: Reply, *, model: str, request_number: int) -> Rendered:
    completion_id = f"chatcmpl-fake{request_number}"
    head = (
        b'data: {"id":"'
        + completion_id.encode()
        + b'","object":"chat.completion.chunk","created":'
        + str(CREATED).encode()
        + b',"model":'
        + _encode(model)
        + b',"system_fingerprint":"fake","choices":[{"index":0,"delta":'
    )
    tail_of_delta = b',"logprobs":null,"finish_reason":null}]}\n\n'

    def delta(fields: dict[str, Any]) -> bytes:
        return head + _encode(fields) + tail_of_delta

    chunks = [delta({"role": "assistant", "content": ""})]
    reasoning_prefix = head + b'{"' + reply.reasoning_field.encode() + b'":'
    for piece in reply.thinking_pieces():
        chunks.append(reasoning_prefix + _encode(piece) + b"}" + tail_of_delta)
    content_prefix = head + b'{"content":'
    for piece in reply.text_pieces():
        chunks.append(content_prefix + _encode(piece) + b"}" + tail_of_delta)
    for index, call in enumerate(reply.tool_calls):
        chunks.extend(_openai_call_deltas(reply, index, call, request_number, delta))
    usage = {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_token_count(),
        "total_tokens": reply.prompt_tokens + reply.completion_token_count(),
    }
    if reply.error_during is not None:
        cut = len(chunks) if reply.error_after is None else reply.error_after
        error = {
            "error": {
                "message": reply.error_during.replace("{model}", model),
                "type": "server_error",
                "code": 500,
            }
        }
        return Rendered(
            content_type="text/event-stream; charset=utf-8",
            chunks=chunks[:cut],
            tail=[b"data: " + _encode(error) + b"\n\n"],
        )
    reason = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    finish: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason}],
    }
    if reply.usage == "final":
        finish["usage"] = usage
    tail = [b"data: " + _encode(finish) + b"\n\n"]
    if reply.usage == "separate":
        separate = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "choices": [],
            "usage": usage,
        }
        tail.append(b"data: " + _encode(separate) + b"\n\n")
    tail.append(b"data: [DONE]\n\n")
    return Rendered(content_type="text/event-stream; charset=utf-8", chunks=chunks, tail=tail)


def _openai_call_deltas(
    reply: Reply,
    index: int,
    call: FakeToolCall,
    request_number: int,
    delta: Any,
) -> list[bytes]:
    call_id = reply.call_id(request_number, index)
    arguments = _encode(call.arguments).decode()
    pieces = max(1, reply.argument_pieces)
    step = max(1, -(-len(arguments) // pieces))
    fragments = [arguments[i : i + step] for i in range(0, len(arguments), step)] or [""]
    out = []
    first: dict[str, Any] = {"index": index, "type": "function"}
    if call_id is not None:
        first["id"] = call_id
    first["function"] = {"name": call.name, "arguments": ""}
    out.append(delta({"tool_calls": [first]}))
    for fragment in fragments:
        part: dict[str, Any] = {"index": index}
        if reply.tool_call_ids == "every":
            part["id"] = call_id
            part["type"] = "function"
            part["function"] = {"name": call.name, "arguments": fragment}
        else:
            part["function"] = {"arguments": fragment}
        out.append(delta({"tool_calls": [part]}))
    return out


def openai_whole(reply: Reply, *, model: str, request_number: int) -> dict[str, Any]:
    """The same reply as a ``stream: false`` answer."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(reply.text_pieces()) or None,
    }
    if reply.thinking_pieces():
        message[reply.reasoning_field] = "".join(reply.thinking_pieces())
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": reply.call_id(request_number, n) or f"call_{n}",
                "type": "function",
                "function": {"name": c.name, "arguments": _encode(c.arguments).decode()},
            }
            for n, c in enumerate(reply.tool_calls)
        ]
    return {
        "id": f"chatcmpl-fake{request_number}",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.finish_reason
                or ("tool_calls" if reply.tool_calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_token_count(),
            "total_tokens": reply.prompt_tokens + reply.completion_token_count(),
        },
    }


def openai_error_body(message: str, status: int) -> dict[str, Any]:
    kind = {404: "not_found_error", 400: "invalid_request_error"}.get(status, "api_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
