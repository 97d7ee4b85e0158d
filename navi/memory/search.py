"""Keyword search over facts: the query's terms, and a ranking done in Python.

The SQL indexes (``navi.memory.index``) rank with the database's full-text search;
this ranking is the same idea for the in-memory store: a fact matches a term when one
of its words is the term or (for terms of 3+ letters) starts with it; matches in the
key count most, then the value, then the category. Any term may match (OR), so a
question in plain words finds the facts it mentions.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from projections.memory import Fact

MAX_TERMS = 16
MAX_TERM_LENGTH = 100  # a longer "word" is noise (and PostgreSQL refuses huge lexemes)
PREFIX_MIN = 3  # shorter terms match whole words only ("i" is not a prefix of everything)
KEY_WEIGHT, VALUE_WEIGHT, CATEGORY_WEIGHT = 2.0, 1.0, 0.5

_WORD = re.compile(r"[^\W_]+")


def fold(text: str) -> str:
    """Lower case without accents: "Élodie" and "elodie" are the same word."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def terms(query: str) -> list[str]:
    """The distinct words of a query, folded, in order (at most ``MAX_TERMS``)."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(fold(query)):
        if len(word) <= MAX_TERM_LENGTH:
            seen.setdefault(word, None)
    return list(seen)[:MAX_TERMS]


def words(text: str) -> list[str]:
    return _WORD.findall(fold(text))


def _matches(term: str, word: str) -> bool:
    return word == term or (len(term) >= PREFIX_MIN and word.startswith(term))


def score(fact: Fact, query_terms: Sequence[str]) -> float:
    fields = (
        (words(fact.key), KEY_WEIGHT),
        (words(fact.value), VALUE_WEIGHT),
        (words(fact.category), CATEGORY_WEIGHT),
    )
    total = 0.0
    for term in query_terms:
        for field_words, weight in fields:
            hits = sum(1 for word in field_words if _matches(term, word))
            total += weight * hits / (1 + 0.05 * len(field_words))
    return total


def rank(facts: Sequence[Fact], query: str, limit: int) -> list[Fact]:
    """The facts matching ``query``, best first (ties by category and key)."""
    query_terms = terms(query)
    if not query_terms:
        return []
    scored = [(score(fact, query_terms), fact) for fact in facts]
    hits = [(s, f) for s, f in scored if s > 0]
    hits.sort(key=lambda pair: (-pair[0], pair[1].category, pair[1].key))
    return [fact for _, fact in hits[:limit]]


def fts5_query(query_terms: Sequence[str]) -> str:
    """An SQLite FTS5 MATCH expression: any term, quoted (terms are letters and digits)."""
    return " OR ".join(f'"{t}"*' if len(t) >= PREFIX_MIN else f'"{t}"' for t in query_terms)


def tsquery(query_terms: Sequence[str]) -> str:
    """A PostgreSQL ``to_tsquery`` expression: any term, prefixes for the longer ones."""
    return " | ".join(f"{t}:*" if len(t) >= PREFIX_MIN else t for t in query_terms)


def indexed_text(text: str) -> str:
    """Text as the SQL indexes store it: folded like the query terms, words apart."""
    return " ".join(words(text))
