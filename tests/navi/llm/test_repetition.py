"""The repetition guard: loops end an embedded answer, ordinary text never does."""

from __future__ import annotations

import re

from navi.llm.repetition import RepetitionGuard

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
