"""A page's CSS cascaded onto its elements: the rules of its ``<style>`` elements (read by
tinycss2, their selectors by cssselect) and its ``style`` attributes, by ``!important``,
origin (the attribute beats a rule), specificity and source order.

What is read: rules at the top of a ``<style>``, or inside ``@media`` for ``all``/``screen``,
``@supports`` and ``@layer``; selectors of tags, ids, classes, attributes, ``:not()``,
``:is()``, ``:where()``, ``:root`` and ``:empty``, joined by descendant or child
combinators. What is not: linked stylesheets (never fetched), sibling combinators,
``:has()``, pseudo-elements, the pseudo-classes of a state (``:hover``, ``:focus``…) or of
a place among siblings (``:nth-child()``…), media features, ``var()``, what a script does.
A rule we cannot judge is skipped, never guessed at.

A selector is matched by libxml2 (lxml's XPath), written from the element up rather than
as cssselect writes it from the left (``div div a`` as ``//div/descendant::div/descendant::a``
takes libxml2 time quadratic in the nested matches: seconds on a large page). From the
element up: its own compound, its parent's for ``>``, and for a descendant combinator the
*nearest* ancestor where the compounds up to the next descendant combinator match
(``ancestor::*[…][1]``). The nearest is enough: the ancestors of any other such match are
the nearest one's ancestors too. So a selector costs at most a look at each element and,
for each candidate of its last compound, compounds x depth; that is charged against a
budget before it runs, and a page whose rules would take more gets the rest of them
unapplied (the filter they serve is defence in depth) and a line in the log.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import cssselect
import lxml.etree
import lxml.html
import structlog
import tinycss2
from cssselect.parser import Attrib, Class, CombinedSelector, Element, Hash, Tree

log = structlog.get_logger(__name__)

# At most this much of a page's <style> text is read (and as much of its style attributes),
# and matched within this budget (of elements looked at: about a second and a half of
# libxml2's time).
MAX_CSS_CHARS = 256 * 1024
MAX_MATCH_STEPS = 6_000_000
# @media and @supports in one another; brackets in a selector; compounds in a selector.
MAX_NESTING = 4
MAX_COMPOUNDS = 8

Tokens = tuple[Any, ...]  # tinycss2 component values, whitespace and comments left out
Declared = dict[str, tuple[Tokens, bool]]  # property → (value, !important)
# (important, from the style attribute, ids, classes, tags, order): the greater wins.
Rank = tuple[int, int, int, int, int, int]
Ranked = dict[str, tuple[Rank, Tokens]]  # property → (rank, value)
_SCREEN_MEDIA = frozenset({"all", "screen", "only all", "only screen"})
# Pseudo-classes of what the page is: the others depend on what the reader does, or count
# siblings (slow on a long list).
_PSEUDO_CLASSES = frozenset({"root", "empty"})
_CLASS_SPACE = re.compile(r"[ \t\r\n]+")  # what XPath's normalize-space() splits on


@dataclass(frozen=True)
class CompiledSelector:
    specificity: tuple[int, int, int]
    xpath: str
    # The tags, classes (".a"), ids ("#a") and attribute names ("[a") an element needs for
    # the selector to match: ``names`` in the whole page, ``own_names`` on the element.
    names: frozenset[str]
    own_names: frozenset[str]
    compounds: int


class BudgetSpent(Exception):
    pass


class Cascade:
    """The declared values of the ``wanted`` properties, element by element."""

    def __init__(
        self, root: lxml.html.HtmlElement, wanted: frozenset[str], *, steps: int = MAX_MATCH_STEPS
    ) -> None:
        # Kept: lxml hands out the same proxy for an element while one is alive.
        self._nodes = [e for e in root.iter() if isinstance(e.tag, str)]
        self._weights = _weights(self._nodes)
        self._declared: dict[lxml.html.HtmlElement, Ranked] = defaultdict(dict)
        self._steps = steps
        try:
            self._apply_style_sheets(root, wanted)
        except BudgetSpent:
            log.info("page_css.budget_spent", steps=steps)
        self._apply_style_attributes(wanted)

    def of(self, element: lxml.html.HtmlElement) -> dict[str, Tokens]:
        """The winning value of each wanted property declared for ``element``."""
        found = self._declared.get(element)
        return {name: value for name, (_, value) in found.items()} if found else {}

    def _apply_style_sheets(self, root: lxml.html.HtmlElement, wanted: frozenset[str]) -> None:
        sheets = [
            e.text_content()
            for e in self._nodes
            if e.tag == "style"
            and on_screen(tinycss2.parse_component_value_list(e.get("media") or "all"))
        ]
        css = "\n".join(sheets)[:MAX_CSS_CHARS]
        rules = tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True)
        # Each selector's declarations over all its rules, the winner of each property: a
        # selector of several rules (``p``, ``a``) is matched once and set once.
        by_selector: dict[CompiledSelector, Ranked] = defaultdict(dict)
        for order, (prelude, found) in enumerate(_style_rules(rules, wanted, MAX_NESTING)):
            for selector in _selectors(prelude):
                _win(by_selector[selector], _ranked(found, 0, *selector.specificity, order))
        for selector, declared in by_selector.items():
            for element in self._matching(root, selector):
                _win(self._declared[element], declared)

    def _apply_style_attributes(self, wanted: frozenset[str]) -> None:
        # Each text read once, and up to MAX_CSS_CHARS of them (tinycss2 reads about a
        # megabyte a second here; a page may be 5 MiB).
        read: dict[str, Ranked] = {}
        unread = MAX_CSS_CHARS
        for element in self._nodes:
            style = element.get("style")
            if not style:
                continue
            found = read.get(style)
            if found is None:
                unread -= len(style)
                if unread < 0:
                    log.info("page_css.style_attributes_unread", chars=MAX_CSS_CHARS)
                    return
                declared = declarations(tinycss2.parse_blocks_contents(style), wanted)
                found = read[style] = _ranked(declared, 1, 0, 0, 0, 0)
            _win(self._declared[element], found)

    def _matching(
        self, root: lxml.html.HtmlElement, selector: CompiledSelector
    ) -> list[lxml.html.HtmlElement]:
        if not self._weights.keys() >= selector.names:
            return []  # it names a tag, class, id or attribute the page does not have
        candidates = min((self._weights[n] for n in selector.own_names), default=self._weights["*"])
        self._steps -= len(self._nodes) + selector.compounds * candidates
        if self._steps < 0:
            raise BudgetSpent
        try:
            found: list[lxml.html.HtmlElement] = lxml.etree.XPath(selector.xpath)(root)
        except lxml.etree.XPathError:  # a namespace prefix (ns|a), never defined here
            return []
        return found


def declarations(nodes: Iterable[Any], wanted: frozenset[str]) -> Declared:
    """The ``wanted`` properties of a block's tinycss2 nodes (the last of each wins)."""
    return {
        node.lower_name: (significant(node.value), node.important)
        for node in nodes
        if node.type == "declaration" and node.lower_name in wanted
    }


def significant(tokens: Iterable[Any]) -> Tokens:
    return tuple(t for t in tokens if t.type not in ("whitespace", "comment"))


def on_screen(media: Iterable[Any]) -> bool:
    """Whether a media query list (``screen``, ``print, screen``) holds on a screen; one with
    media features (``(max-width: 600px)``) we cannot judge, so it does not."""
    query: list[str] = []
    for token in [*significant(media), None]:
        if token is None or token == ",":
            if " ".join(query) in _SCREEN_MEDIA:
                return True
            query = []
        else:
            query.append(token.lower_value if token.type == "ident" else "?")
    return False


def _ranked(found: Declared, inline: int, a: int, b: int, c: int, order: int) -> Ranked:
    return {name: ((imp, inline, a, b, c, order), value) for name, (value, imp) in found.items()}


def _win(declared: Ranked, found: Ranked) -> None:
    """Record each of ``found`` in ``declared`` where it outranks what is there."""
    for name, (rank, value) in found.items():
        held = declared.get(name)
        if held is None or rank >= held[0]:
            declared[name] = (rank, value)


def _style_rules(
    rules: Iterable[Any], wanted: frozenset[str], nesting: int
) -> Iterator[tuple[Tokens, Declared]]:
    """(selectors, declarations) of the style rules that apply on a screen and set a
    ``wanted`` property, in order."""
    for rule in rules:
        if rule.type == "qualified-rule":
            found = declarations(tinycss2.parse_blocks_contents(rule.content), wanted)
            if found:
                yield tuple(rule.prelude), found  # whitespace and all: it is a combinator
        elif rule.type == "at-rule" and rule.content is not None and nesting:
            name = rule.lower_at_keyword
            if name in ("supports", "layer") or (name == "media" and on_screen(rule.prelude)):
                inner = tinycss2.parse_blocks_contents(
                    rule.content, skip_comments=True, skip_whitespace=True
                )
                yield from _style_rules(inner, wanted, nesting - 1)


def _selectors(prelude: Tokens) -> tuple[CompiledSelector, ...]:
    if _nested(prelude, MAX_NESTING):
        return ()  # tinycss2's serializer and cssselect's parser recurse
    return _compiled(tinycss2.serialize(prelude).strip())


@functools.lru_cache(maxsize=4096)
def _compiled(text: str) -> tuple[CompiledSelector, ...]:
    """The selectors of a rule that we can judge; none if it does not parse (as in a
    browser). One of a pseudo-element is left out: ``::before`` is not the element's text."""
    try:
        parsed = cssselect.parse(text)
    except cssselect.SelectorError:
        return ()
    compiled = []
    for selector in parsed:
        if selector.pseudo_element is not None:
            continue
        try:
            xpath, compounds = _TRANSLATOR.upward_xpath(selector.parsed_tree)
        except cssselect.SelectorError:
            continue
        last = selector.parsed_tree
        while isinstance(last, CombinedSelector):
            last = last.subselector
        names, own = frozenset(_required(selector.parsed_tree)), frozenset(_required(last))
        compiled.append(CompiledSelector(selector.specificity(), xpath, names, own, compounds))
    return tuple(compiled)


def _nested(tokens: Iterable[Any], levels: int) -> bool:
    """Whether ``tokens`` nest brackets more than ``levels`` deep."""
    for _ in range(levels + 1):
        tokens = [
            inner
            for token in tokens
            for inner in (
                getattr(token, "arguments", None) or getattr(token, "content", None) or ()
            )
        ]
        if not tokens:
            return False
    return True


def _required(tree: Tree) -> Iterator[str]:
    """The names (as in ``CompiledSelector``) an element needs for ``tree`` to match it; those
    inside ``:not()`` and ``:is()`` are not needed."""
    stack = [tree]
    while stack:
        node: Any = stack.pop()
        if isinstance(node, CombinedSelector):
            stack += (node.selector, node.subselector)
        elif isinstance(node, Element):
            if node.element:
                yield node.element.lower()
        else:
            if isinstance(node, Class):
                yield f".{node.class_name}"
            elif isinstance(node, Hash):
                yield f"#{node.id}"
            elif isinstance(node, Attrib):
                yield f"[{node.attrib.lower()}"
            stack.append(node.selector)  # Pseudo, Function, Negation, Matching… have one


def _weights(nodes: list[lxml.html.HtmlElement]) -> dict[str, int]:
    """Each name of the page (as in ``CompiledSelector``; ``*`` for all) → the sum over the elements
    that have it of their depth + 1: what looking up their ancestors costs at most."""
    weights: dict[str, int] = defaultdict(int)
    depth: dict[lxml.html.HtmlElement, int] = {}
    for element in nodes:
        weight = depth[element] = depth.get(element.getparent(), 0) + 1
        names = [
            "*",
            element.tag,
            *(f"[{name}" for name in element.keys()),  # noqa: SIM118 (an lxml element)
            *(f".{name}" for name in _CLASS_SPACE.split(element.get("class") or "") if name),
        ]
        if (id_ := element.get("id")) is not None:
            names.append(f"#{id_}")
        for name in names:
            weights[name] += weight
    return dict(weights)


class _Translator(cssselect.HTMLTranslator):
    """cssselect's HTML translator, for what we can judge, from the element up."""

    def upward_xpath(self, tree: Tree) -> tuple[str, int]:
        """The XPath of the elements ``tree`` matches, and its number of compounds."""
        # The compounds from the right, in runs joined by ">" (split at descendant ones).
        runs: list[list[Tree]] = [[]]
        while isinstance(tree, CombinedSelector):
            if tree.combinator not in (" ", ">"):
                raise cssselect.ExpressionError("a sibling combinator")
            runs[-1].append(tree.subselector)
            if tree.combinator == " ":
                runs.append([])
            tree = tree.selector
        runs[-1].append(tree)
        compounds = sum(map(len, runs))
        if compounds > MAX_COMPOUNDS:
            raise cssselect.ExpressionError("too many compounds")
        above = ""  # what must hold above the run being written: from the leftmost run
        for run in reversed(runs[1:]):
            top = "/parent::*" * (len(run) - 1)
            above = f"ancestor::{self._run(run, '')}[1]{top}" + (f"[{above}]" if above else "")
        return f"descendant-or-self::{self._run(runs[0], above)}", compounds

    def _run(self, run: list[Tree], above: str) -> str:
        """A step to the element ``run[0]`` matches, whose parent ``run[1]`` matches…,
        and where ``above`` holds at the last one's."""
        step = ""
        for tree in reversed(run):
            expr = self.xpath(tree)
            if expr.path:
                raise cssselect.ExpressionError("not one element")
            condition = _both(expr.condition, f"parent::{step}" if step else above)
            step = expr.element + (f"[{condition}]" if condition else "")
        return step

    def xpath_pseudo(self, pseudo: Any) -> Any:
        if pseudo.ident not in _PSEUDO_CLASSES:
            raise cssselect.ExpressionError(f":{pseudo.ident} is not judged")
        return super().xpath_pseudo(pseudo)

    def xpath_function(self, function: Any) -> Any:
        raise cssselect.ExpressionError(f":{function.name}() is not judged")

    def xpath_relation(self, relation: Any) -> Any:
        raise cssselect.ExpressionError(":has() is not judged")

    def xpath_negation(self, negation: Any) -> Any:
        if isinstance(negation.subselector, CombinedSelector):
            raise cssselect.ExpressionError(":not() of a combinator is not judged")
        return super().xpath_negation(negation)


def _both(one: str, other: str) -> str:
    return f"({one}) and ({other})" if one and other else one or other


_TRANSLATOR = _Translator()
