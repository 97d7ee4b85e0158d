"""The repetition guard: loops end an embedded answer, ordinary text never does; and the
embedded text path's cap and notes (with a scripted stand-in for llama.cpp's stream)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

from navi.llm.embedded import (
    CAP_NOTE,
    REPETITION_NOTE,
    EmbeddedBackend,
    GenerationStats,
    _build_request,
)
from navi.llm.repetition import RepetitionGuard
from navi.llm.settings import LLMSettings
from navi.llm.types import ChatMessage, FinalChunk, LLMOptions, TextPiece

PROSE = (
    "Navi keeps every conversation as an event log. Each answer streams token by token, "
    "and a stop takes effect at once. When the context grows too long, older turns are "
    "summarised, so the model keeps the gist of what was said. Tools run in a sandbox; "
    "their results are recorded before the model sees them.\n"
)

CODE = """def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b
"""

LIST = "".join(f"- item {n}: buy {n} apples\n" for n in range(1, 40))


def pieces(text: str) -> list[str]:
    """Token-like pieces: words with their spaces, as a model streams them."""
    return re.findall(r"\s*\S+|\s+", text)


def trips_at(text: str) -> int | None:
    """How many characters were fed when the guard tripped (None: never)."""
    guard = RepetitionGuard()
    fed = 0
    for piece in pieces(text):
        fed += len(piece)
        if guard.feed(piece):
            return fed
    return None


def test_a_repeated_line_trips_soon() -> None:
    line = "Hi! How can I help you today?\n"
    fed = trips_at(line * 200)
    assert fed is not None and fed <= len(line) * 8


def test_a_repeated_paragraph_trips() -> None:
    fed = trips_at(PROSE * 6)
    assert fed is not None and fed <= len(PROSE) * 3 + 40


def test_a_stuttered_word_trips() -> None:
    fed = trips_at("hi " * 500)
    assert fed is not None and fed <= 200


def test_ordinary_text_never_trips() -> None:
    assert trips_at(PROSE) is None
    assert trips_at(CODE) is None
    assert trips_at(LIST) is None
    # A short repetition is not a loop: a word said twice, a line echoed once.
    assert trips_at("Yes, yes. " + PROSE + PROSE[:80]) is None
    # Nor a markdown table whose rows look alike.
    table = "| a | b |\n|---|---|\n" + "".join(f"| {n} | {n * n} |\n" for n in range(30))
    assert trips_at(table) is None


def test_once_tripped_it_stays_tripped_and_names_the_period() -> None:
    guard = RepetitionGuard()
    line = "the same line again\n"
    for _ in range(20):
        guard.feed(line)
    assert guard.tripped and guard.period == len(line)
    assert guard.feed("something new")


class ScriptedLlama:
    """Stands in for llama_cpp.Llama in the text path: streams scripted pieces."""

    def __init__(self, pieces: list[str], finish: str = "stop") -> None:
        self.pieces = pieces
        self.finish = finish
        self.n_tokens = 0
        self.sent = 0
        self.kwargs: dict[str, Any] = {}

    def create_chat_completion(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.kwargs = kwargs

        def parts() -> Iterator[dict[str, Any]]:
            for piece in self.pieces:
                self.sent += 1
                yield {"choices": [{"delta": {"content": piece}, "finish_reason": None}]}
            yield {"choices": [{"delta": {}, "finish_reason": self.finish}]}

        return parts()


def generate(llama: ScriptedLlama, options: LLMOptions) -> list[object]:
    backend = EmbeddedBackend(LLMSettings(embedded_max_tokens=512))
    request = _build_request([ChatMessage(role="user", content="Say hi")], (), options, 512)
    out: list[object] = []

    def emit(item: object) -> bool:
        out.append(item)
        return True

    backend._generate_text(
        llama, request, lambda _ids, scores: scores, emit, threading.Event(), GenerationStats()
    )
    return out


def test_the_embedded_text_stream_ends_a_loop_with_a_note() -> None:
    llama = ScriptedLlama(pieces(("Hi! How can I help you today?\n") * 300))
    out = generate(llama, LLMOptions())
    assert llama.sent < 100  # stopped early, not after 300 lines
    assert llama.kwargs["max_tokens"] == 512 and llama.kwargs["repeat_penalty"] > 1
    *_, note, final = out
    assert isinstance(note, TextPiece) and note.text == REPETITION_NOTE
    assert isinstance(final, FinalChunk) and final.finish_reason == "repetition"


def test_the_default_cap_says_so_and_a_callers_cap_does_not() -> None:
    out = generate(ScriptedLlama(pieces(PROSE), finish="length"), LLMOptions())
    assert isinstance(out[-2], TextPiece) and out[-2].text == CAP_NOTE.format(cap=512)
    assert isinstance(out[-1], FinalChunk) and out[-1].finish_reason == "length"
    out = generate(ScriptedLlama(pieces(PROSE), finish="length"), LLMOptions(max_tokens=40))
    assert not any(isinstance(o, TextPiece) and "NAVI_EMBEDDED" in o.text for o in out)
    out = generate(ScriptedLlama(pieces(PROSE)), LLMOptions())
    assert isinstance(out[-1], FinalChunk) and out[-1].finish_reason == "stop"
    assert "".join(o.text for o in out if isinstance(o, TextPiece)) == PROSE
