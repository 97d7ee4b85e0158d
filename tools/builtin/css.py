"""The CSS a page-only reader can read: declarations, the rules of a page's ``<style>``
and their simple selectors (tools/builtin/css_cascade.py applies them to the page).

What is read: rules at the top of a ``<style>`` element, or inside ``@media`` for
``all``/``screen``, ``@supports`` and ``@layer``; selectors made of a tag, ``#id``,
``.class`` and ``[attr]``/``[attr=value]``/``[attr~=value]``, joined by descendant
(space) or child (``>``) combinators; ``!important``, specificity and source order.
What is not: linked stylesheets (never fetched), pseudo-classes and -elements, sibling
combinators, media features, ``var()``, and anything a script does. A rule we cannot
read is skipped, never guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# At most this much of a page's <style> text is read: a page cannot make reading it slow
# (nor matching it: tools/builtin/css_cascade.py).
MAX_CSS_CHARS = 256 * 1024
MAX_COMPOUNDS = 8
MAX_NESTING = 4

_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_IMPORTANT = re.compile(r"!\s*important\s*$", re.IGNORECASE)
_NAME = r"-?[A-Za-z_][A-Za-z0-9_-]*"
# One token of a selector; anything else (":", "+", "~", "|", "\\", ",") is "bad".
_SELECTOR_TOKEN = re.compile(
    rf"""(?P<comb>\s*>\s*|\s+)
    |(?P<tag>[A-Za-z][A-Za-z0-9-]*|\*)
    |\#(?P<id>{_NAME})
    |\.(?P<cls>{_NAME})
    |(?P<attr>\[\s*(?P<name>{_NAME})\s*
        (?:(?P<op>~?=)\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>{_NAME}))\s*)?\])
    |(?P<bad>.)""",
    re.VERBOSE | re.DOTALL,
)
_SCREEN_MEDIA = frozenset({"all", "screen", "only all", "only screen"})


@dataclass(frozen=True)
class Compound:
    tag: str | None
    ids: tuple[str, ...]
    classes: tuple[str, ...]
    # (name, operator, value): operator "" (present), "=" or "~=".
    attrs: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class Selector:
    # Left to right; each compound but the first with the combinator before it.
    compounds: tuple[Compound, ...]
    combinators: tuple[str, ...]

    @property
    def specificity(self) -> tuple[int, int, int]:
        ids = sum(len(c.ids) for c in self.compounds)
        classes = sum(len(c.classes) + len(c.attrs) for c in self.compounds)
        tags = sum(c.tag not in (None, "*") for c in self.compounds)
        return ids, classes, tags


@dataclass(frozen=True)
class Rule:
    selectors: tuple[Selector, ...]
    declarations: dict[str, tuple[str, bool]]  # property → (value, important)


def declarations(text: str, wanted: frozenset[str]) -> dict[str, tuple[str, bool]]:
    """``prop: value`` pairs of a declaration block (the last of each wins), only the
    properties in ``wanted``."""
    found: dict[str, tuple[str, bool]] = {}
    for part in text.split(";"):
        name, colon, value = part.partition(":")
        name = name.strip().lower()
        if not colon or name not in wanted:
            continue
        important = _IMPORTANT.search(value)
        if important is not None:
            value = value[: important.start()]
        found[name] = (value.strip(), important is not None)
    return found


def parse_selector(text: str) -> Selector | None:
    """A selector we can match, or None (a pseudo-class, a sibling combinator…)."""
    compounds: list[Compound] = []
    combinators: list[str] = []
    parts: _Parts | None = None
    for token in _SELECTOR_TOKEN.finditer(text.strip()):
        kind = token.lastgroup
        if kind == "comb":
            if parts is None:
                return None  # a combinator with nothing before it
            compounds.append(parts.compound())
            combinators.append(">" if ">" in token.group() else " ")
            parts = None
            continue
        if kind == "bad" or (kind == "tag" and parts is not None):
            return None
        parts = parts or _Parts()
        parts.add(token)
    if parts is None or len(compounds) >= MAX_COMPOUNDS:
        return None  # empty, or ends with a combinator
    compounds.append(parts.compound())
    return Selector(tuple(compounds), tuple(combinators))


class _Parts:
    """The parts of one compound selector, as they are read."""

    def __init__(self) -> None:
        self.tag: str | None = None
        self.ids: list[str] = []
        self.classes: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []

    def add(self, token: re.Match[str]) -> None:
        kind = token.lastgroup
        if kind == "tag":
            self.tag = None if token.group("tag") == "*" else token.group("tag").lower()
        elif kind == "id":
            self.ids.append(token.group("id"))
        elif kind == "cls":
            self.classes.append(token.group("cls"))
        else:
            value = token.group("dq") or token.group("sq") or token.group("bare") or ""
            self.attrs.append((token.group("name").lower(), token.group("op") or "", value))

    def compound(self) -> Compound:
        return Compound(self.tag, tuple(self.ids), tuple(self.classes), tuple(self.attrs))


def stylesheet_rules(css: str, wanted: frozenset[str]) -> Iterator[Rule]:
    """The rules of a style sheet that apply on a screen and set a ``wanted`` property."""
    return _rules(_COMMENT.sub(" ", css), wanted, MAX_NESTING)


def _rules(css: str, wanted: frozenset[str], nesting: int) -> Iterator[Rule]:
    for prelude, block in _blocks(css):
        if prelude.startswith("@"):
            name, _, condition = prelude[1:].partition(" ")
            name = name.lower()
            media = name == "media" and on_screen(condition)
            if nesting and (media or name in ("supports", "layer")):
                yield from _rules(block, wanted, nesting - 1)
            continue
        found = declarations(block, wanted)
        if not found:
            continue
        selectors = [parse_selector(part) for part in _split_selectors(prelude)]
        usable = tuple(s for s in selectors if s is not None)
        if usable:
            yield Rule(usable, found)


def on_screen(condition: str) -> bool:
    """Whether a media query list (``screen``, ``print, screen``) holds on a screen; one
    with media features (``(max-width: 600px)``) we cannot judge, so it does not."""
    queries = [" ".join(q.split()).lower() for q in condition.split(",")]
    return any(q in _SCREEN_MEDIA for q in queries)


def _split_selectors(prelude: str) -> list[str]:
    # A comma inside parentheses (":is(a, b)") belongs to one selector, which we skip.
    if "(" in prelude:
        return [prelude]
    return prelude.split(",")


def _blocks(css: str) -> Iterator[tuple[str, str]]:
    """(prelude, block) of each top-level ``prelude { block }``; a statement at-rule
    (``@import …;``) and an unclosed block are skipped."""
    position, length = 0, len(css)
    while position < length:
        brace = css.find("{", position)
        if brace < 0:
            return
        prelude = css[position:brace]
        if ";" in prelude:  # statements before it (@import, @charset): not rules
            prelude = prelude.rsplit(";", 1)[1]
        depth, end = 1, brace + 1
        while end < length and depth:
            char = css[end]
            if char in "\"'":
                closing = css.find(char, end + 1)
                end = length if closing < 0 else closing
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            end += 1
        if depth:
            return
        yield " ".join(prelude.split()), css[brace + 1 : end - 1]
        position = end
