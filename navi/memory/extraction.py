"""The extraction prompt and the strict reading of its answer.

The model answers JSON: ``{"facts": [{"category", "key", "value", "source_seqs"}]}``.
An answer that is not that exactly — not JSON, a missing or unknown field, a wrong
type, an unknown category, an empty key or value, a source seq that is not one of the
messages it was shown — is refused as a whole (:class:`BrokenAnswer`): nothing of it
is used, so nothing is half-written.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Annotated

import msgspec

from navi.llm.types import ChatMessage
from navi.memory.facts import Category, normalize_key
from navi.memory.turns import TurnChunk
from projections.memory import Fact

DEFAULT_EXTRACTION_PROMPT = """\
You extract durable facts about the user from a conversation between the user and an \
AI assistant, so that the assistant remembers them in future conversations.

Worth remembering: the user's preferences (tools, languages, style, how they like \
answers), projects (what they work on), environment (operating system, hardware, \
software, setup), personal details (name, location, job) and other lasting facts.
Not worth remembering: one-off requests, facts about the assistant, general knowledge, \
anything the user did not state or clearly confirm.

Rules:
- category: one of "preference", "project", "environment", "personal", "other".
- key: a short, stable snake_case name for the fact (e.g. "editor", "operating_system", \
"current_project"). When a known fact changed, reuse its key with the new value.
- value: the fact, short and self-contained.
- source_seqs: the [seq N] numbers of the messages the fact comes from.
- Nothing worth remembering: answer {"facts": []}.

Answer with JSON only, no prose, exactly in this shape:
{"facts": [{"category": "preference", "key": "editor", "value": "Uses Neovim", \
"source_seqs": [3]}]}"""

# How many known facts the prompt lists (so the model reuses their keys).
MAX_KNOWN_FACTS = 200

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n?```$", re.S)


class ExtractedFact(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    category: Category
    key: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    value: Annotated[str, msgspec.Meta(min_length=1, max_length=2000)]
    source_seqs: Annotated[list[int], msgspec.Meta(min_length=1)]


class ExtractionAnswer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    facts: list[ExtractedFact]


_answer_decoder = msgspec.json.Decoder(ExtractionAnswer)


class BrokenAnswer(ValueError):
    """The model's answer is unusable; the message says why (it is logged and recorded)."""


def prompt_sha(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()[:16]


def extraction_messages(
    chunk: TurnChunk, known: Sequence[Fact], *, prompt: str = DEFAULT_EXTRACTION_PROMPT
) -> list[ChatMessage]:
    """The system prompt, then the known facts and the conversation as one user message.

    Forgotten facts are never in ``known`` (callers pass active facts), so a forgotten
    value never reaches a model again."""
    lines = ["Known facts (reuse their keys when a value changed):"]
    shown = list(known)[:MAX_KNOWN_FACTS]
    lines += [f"- {f.category} / {f.key}: {f.value}" for f in shown] or ["(none yet)"]
    lines += ["", "Conversation:"]
    lines += [f"[seq {t.seq}] {t.role}: {t.text}" for t in chunk.turns]
    return [
        ChatMessage(role="system", content=prompt),
        ChatMessage(role="user", content="\n".join(lines)),
    ]


def _unfenced(text: str) -> str:
    text = text.strip()
    match = _FENCE.match(text)
    return match.group(1).strip() if match else text


def parse_answer(text: str, chunk: TurnChunk) -> list[ExtractedFact]:
    """The facts of an extraction answer, or :class:`BrokenAnswer`.

    A ```json fence around the answer is tolerated; nothing else is."""
    body = _unfenced(text)
    if not body:
        raise BrokenAnswer("the answer is empty")
    try:
        answer = _answer_decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise BrokenAnswer(f"the answer has wrong fields: {exc}") from None
    except msgspec.DecodeError as exc:
        raise BrokenAnswer(f"the answer is not valid JSON: {exc}; it began {body[:80]!r}") from None
    allowed = chunk.seqs
    for index, fact in enumerate(answer.facts):
        where = f"facts[{index}]"
        if not normalize_key(fact.key):
            raise BrokenAnswer(f"{where}.key {fact.key!r} has no letters or digits")
        if not fact.value.strip():
            raise BrokenAnswer(f"{where}.value is blank")
        unknown = sorted(set(fact.source_seqs) - allowed)
        if unknown:
            raise BrokenAnswer(
                f"{where}.source_seqs names {unknown}, which are not messages of this "
                f"conversation (it has {sorted(allowed)})"
            )
    return answer.facts
