"""The OpenAI chat-completions wire format, as Navi's ``/v1`` reads and writes it: the
request (checked into :class:`Turn`s), the answers (``chat.completion``, its streamed
``chat.completion.chunk``s, SSE framing).

What a request may hold and what is refused (400) is decided here, so the route module
only orchestrates:
- ``model`` is ``navi/<profile_id>`` (anything else: 404 ``model_not_found``);
- client-side ``tools``/``tool_choice``/``functions``/``function_call`` are refused:
  Navi's tools run on the server, chosen by the profile;
- ``messages``: ``system`` (or ``developer``), ``user`` and ``assistant`` with text or
  content parts; ``tool``/``function`` messages and assistant ``tool_calls`` belong to
  client-side tools and are refused; the last message is the user's;
- images are ``image_url`` parts holding a ``data:<type>;base64,…`` URL; a remote URL is
  refused (Navi does not fetch it on a client's behalf), as is anything over the limits
  of a message's images (navi/session/input.py).

Errors are errors.py's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any, Literal

import msgspec

from navi.server.openai.errors import invalid
from navi.session.input import MAX_IMAGE_BYTES, MAX_IMAGES, MAX_TEXT_CHARS

MODEL_PREFIX = "navi/"

_encode = msgspec.json.Encoder().encode


# ---------------------------------------------------------------- the request


class ImageURL(msgspec.Struct, kw_only=True):
    url: str
    detail: str | None = None


class TextPart(msgspec.Struct, kw_only=True, tag_field="type", tag="text"):
    text: str


class ImagePart(msgspec.Struct, kw_only=True, tag_field="type", tag="image_url"):
    image_url: ImageURL | str


Part = TextPart | ImagePart


class ChatMessageIn(msgspec.Struct, kw_only=True):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[Part] | None = None
    name: str | None = None
    tool_calls: list[Any] | None = None
    function_call: Any = None
    tool_call_id: str | None = None


class StreamOptions(msgspec.Struct, kw_only=True):
    include_usage: bool = False


class ChatRequest(msgspec.Struct, kw_only=True):
    """The fields Navi reads; others (``top_p``, ``seed``, ``user``…) are accepted and
    ignored: the profile decides how its model is called. ``temperature``,
    ``max_tokens`` (or ``max_completion_tokens``), ``stop`` and ``response_format``
    reach every tool-loop LLM call of the run (options.py)."""

    model: str
    messages: list[ChatMessageIn]
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    functions: list[Any] | None = None
    function_call: Any = None
    n: int | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stop: str | list[str] | None = None
    response_format: dict[str, Any] | None = None


class Turn(msgspec.Struct, frozen=True, kw_only=True):
    """One step of a conversation as Navi keeps it: a system prompt, a user message (its
    text and images) or an assistant answer."""

    role: Literal["system", "user", "assistant"]
    text: str
    images: tuple[bytes, ...] = ()

    @property
    def image_hashes(self) -> tuple[str, ...]:
        return tuple(hashlib.sha256(data).hexdigest() for data in self.images)


def profile_of_model(model: str) -> str | None:
    """``navi/<profile_id>`` → the profile id; None for any other name."""
    if not model.startswith(MODEL_PREFIX):
        return None
    return model[len(MODEL_PREFIX) :] or None


def model_id(profile_id: str) -> str:
    return MODEL_PREFIX + profile_id


def refuse_client_tools(request: ChatRequest) -> None:
    for name in ("tools", "functions", "tool_choice", "function_call"):
        value = getattr(request, name)
        if value is None or value == []:
            continue
        raise invalid(
            f"'{name}' is not supported: Navi runs its own tools on the server (those of "
            "the model's profile, see GET /agents/tools?profile_id=…); send the request "
            "without client-side tools",
            code="tools_not_supported",
            param=name,
        )
    if request.n not in (None, 1):
        raise invalid(
            "only one choice is made per request: leave 'n' out or set it to 1", param="n"
        )


def decode_data_url(url: str, where: str) -> bytes:
    """An image's bytes from a ``data:<type>;base64,<data>`` URL."""
    if not url.startswith("data:"):
        raise invalid(
            f"{where}: Navi does not fetch remote images; send the image inline as a data "
            "URL (data:image/png;base64,…)",
            code="invalid_image_url",
        )
    header, comma, data = url.partition(",")
    if not comma or not header.endswith(";base64"):
        raise invalid(
            f"{where}: the data URL must be base64 (data:image/png;base64,…)",
            code="invalid_image_url",
        )
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise invalid(f"{where}: the image is not valid base64", code="invalid_image_url") from None
    if len(raw) > MAX_IMAGE_BYTES:
        raise invalid(
            f"{where}: the image is {len(raw) // 1024} KB; the limit is "
            f"{MAX_IMAGE_BYTES // 1024} KB",
            code="invalid_image_url",
        )
    return raw


def _content(message: ChatMessageIn, index: int) -> tuple[str, tuple[bytes, ...]]:
    where = f"messages[{index}]"
    content = message.content
    if content is None:
        return "", ()
    if isinstance(content, str):
        return content, ()
    texts: list[str] = []
    images: list[bytes] = []
    for number, part in enumerate(content):
        if isinstance(part, TextPart):
            texts.append(part.text)
            continue
        if message.role != "user":
            raise invalid(f"{where}: only user messages may hold images", param="messages")
        url = part.image_url if isinstance(part.image_url, str) else part.image_url.url
        images.append(decode_data_url(url, f"{where}.content[{number}]"))
    return "\n\n".join(texts), tuple(images)


def _merge(turns: list[Turn], turn: Turn) -> None:
    """Consecutive turns of one role are one turn (a session records one user message
    per run and one answer per run)."""
    if turns and turns[-1].role == turn.role:
        last = turns[-1]
        text = "\n\n".join(t for t in (last.text, turn.text) if t)
        turns[-1] = Turn(role=turn.role, text=text, images=last.images + turn.images)
    else:
        turns.append(turn)


SYSTEM_NOTE = "[System message from the client]\n"


def conversation(messages: list[ChatMessageIn]) -> list[Turn]:
    """The request's messages as turns (see the module doc of history.py for why
    this shape): system messages before the first user or assistant message are the
    conversation's system prompt; a later one goes into the next user message, marked
    ``SYSTEM_NOTE``; consecutive messages of one role merge; empty answers are left out.
    The last turn is the user message to answer."""
    if not messages:
        raise invalid("'messages' must hold at least one message", param="messages")
    if messages[-1].role != "user":
        raise invalid(
            "the last message must be the user's: Navi answers it (one assistant message)",
            param="messages",
        )
    turns: list[Turn] = []
    pending: list[str] = []  # system messages waiting for the next user message
    for index, message in enumerate(messages):
        if message.role in ("tool", "function") or message.tool_calls or message.function_call:
            raise invalid(
                f"messages[{index}]: tool calls and tool results belong to client-side "
                "tools, which Navi does not take: its own tools run on the server",
                code="tools_not_supported",
                param="messages",
            )
        text, images = _content(message, index)
        if len(text) > MAX_TEXT_CHARS:
            raise invalid(
                f"messages[{index}] is {len(text)} characters; the limit is {MAX_TEXT_CHARS}",
                param="messages",
            )
        if message.role in ("system", "developer"):
            if all(turn.role == "system" for turn in turns):
                if text.strip():
                    _merge(turns, Turn(role="system", text=text))
            elif text.strip():
                pending.append(SYSTEM_NOTE + text)
        elif message.role == "user":
            if pending:
                text = "\n\n".join([*pending, text])
                pending = []
            _merge(turns, Turn(role="user", text=text, images=images))
        elif text.strip():
            _merge(turns, Turn(role="assistant", text=text))
    last = turns[-1]
    if not last.text.strip() and not last.images:
        raise invalid("the last user message is empty", param="messages")
    for turn in turns:
        if len(turn.images) > MAX_IMAGES:
            raise invalid(
                f"at most {MAX_IMAGES} images per user message, got {len(turn.images)}",
                param="messages",
            )
        # Each message was checked on its own; merged, they are one message of the
        # session's, which has the same limit.
        if len(turn.text) > MAX_TEXT_CHARS:
            raise invalid(
                f"consecutive {turn.role} messages merge into one message (with the system "
                f"messages before a user message) of {len(turn.text)} characters; the "
                f"limit is {MAX_TEXT_CHARS}",
                param="messages",
            )
    return turns


# ---------------------------------------------------------------- answers


class Usage(msgspec.Struct, kw_only=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def as_json(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


def completion(
    *, id: str, created: int, model: str, content: str, reasoning: str, usage: Usage
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning:
        message["reasoning_content"] = reasoning
    return {
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
        "usage": usage.as_json(),
    }


def chunk(
    *,
    id: str,
    created: int,
    model: str,
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: Usage | None = None,
) -> dict[str, Any]:
    """One ``chat.completion.chunk``; with ``usage`` and no delta, the usage chunk (its
    ``choices`` are empty, as OpenAI sends it)."""
    out: dict[str, Any] = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
    }
    if delta is not None:
        out["choices"] = [
            {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        ]
    if usage is not None:
        out["usage"] = usage.as_json()
    return out


def sse(data: dict[str, Any]) -> bytes:
    return b"data: " + _encode(data) + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"
SSE_KEEPALIVE = b": keep-alive\n\n"
