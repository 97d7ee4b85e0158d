"""The narrative summary: its prompt, and what goes into every run's context.

The context gets the LLM-written summary only while it is *current* (written from the
facts as they are now). Otherwise — the facts changed and the new summary is not
written yet, or writing it failed — it gets the facts themselves, listed: never a
summary that still mentions an edited or forgotten value.
"""

from __future__ import annotations

from collections.abc import Sequence

from navi.llm.types import ChatMessage
from projections.memory import Fact, MemoryState

MEMORY_HEADER = "## What I remember about the user"

DEFAULT_SUMMARY_PROMPT = """\
You keep the long-term memory of an AI assistant about its user. From the facts below, \
write a short narrative (at most about 150 words) in the third person ("The user ..."), \
grouping related facts. Use only these facts; invent nothing. Plain text: no heading, \
no list, no preamble."""


def fact_line(fact: Fact) -> str:
    return f"- {fact.category} / {fact.key}: {fact.value}"


def summary_messages(
    facts: Sequence[Fact], *, prompt: str = DEFAULT_SUMMARY_PROMPT
) -> list[ChatMessage]:
    body = "Facts:\n" + "\n".join(fact_line(f) for f in facts)
    return [ChatMessage(role="system", content=prompt), ChatMessage(role="user", content=body)]


def listed_facts(facts: Sequence[Fact]) -> str:
    """The facts as a list: what the context gets when no summary is current."""
    return "Known facts about the user:\n" + "\n".join(fact_line(f) for f in facts)


def memory_text(state: MemoryState) -> str | None:
    """What Navi remembers, for the context: the current summary, else the facts listed;
    None when there is nothing to remember."""
    facts = state.active()
    if not facts:
        return None
    if state.summary_is_current and state.summary is not None and state.summary.text.strip():
        return state.summary.text.strip()
    return listed_facts(facts)


def memory_message(state: MemoryState) -> str | None:
    """The system message injected into every run (after the system prompt)."""
    text = memory_text(state)
    return None if text is None else f"{MEMORY_HEADER}\n\n{text}"
