"""A page's CSS cascaded onto its elements: the ``<style>`` rules (read by
tools/builtin/css.py) and the ``style`` attributes, by ``!important``, origin
(the attribute beats a rule), specificity and source order.

Matching works on the page's elements numbered in document order (their tag, id,
classes and parent in plain lists), right to left from the candidates the last
compound's id, class or tag index gives. It spends a budget of steps (a candidate, an
ancestor tried); a page whose rules would take more gets the rest of them unapplied
(the filter they serve is defence in depth) and a line in the log.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator

import lxml.html
import structlog

from tools.builtin.css import MAX_CSS_CHARS, Compound, Selector, declarations, on_screen
from tools.builtin.css import stylesheet_rules as rules_of

log = structlog.get_logger(__name__)

MAX_MATCH_STEPS = 200_000
# (important, from the style attribute, ids, classes, tags, order): the greater wins.
Rank = tuple[int, int, int, int, int, int]
# (compound index, element number) → whether it matches.
Memo = dict[tuple[int, int], bool]
_NONE: frozenset[str] = frozenset()
# A style attribute's rank, normal and !important: above every rule of the same weight.
_INLINE: tuple[Rank, Rank] = ((0, 1, 0, 0, 0, 0), (1, 1, 0, 0, 0, 0))


class BudgetSpent(Exception):
    pass


class Cascade:
    """The declared values of the ``wanted`` properties, element by element."""

    def __init__(
        self, root: lxml.html.HtmlElement, wanted: frozenset[str], *, steps: int = MAX_MATCH_STEPS
    ) -> None:
        nodes = [e for e in root.iter() if isinstance(e.tag, str)]
        self._position = {element: i for i, element in enumerate(nodes)}
        self._nodes = nodes
        self._parent = [self._position.get(e.getparent(), -1) for e in nodes]
        self._tags: list[str] = [e.tag for e in nodes]
        self._ids = [e.get("id") for e in nodes]
        self._classes = [frozenset(c.split()) if (c := e.get("class")) else _NONE for e in nodes]
        self._index()
        self._declared: dict[int, dict[str, tuple[Rank, str]]] = defaultdict(dict)
        self._steps = steps
        self._matched: dict[Selector, list[int]] = {}
        sheets = [
            e.text_content()
            for e in nodes
            if e.tag == "style" and on_screen(e.get("media") or "all")
        ]
        try:
            for order, rule in enumerate(rules_of("\n".join(sheets)[:MAX_CSS_CHARS], wanted)):
                for selector in rule.selectors:
                    self._apply(selector, rule.declarations, order)
        except BudgetSpent:
            log.info("page_css.budget_spent", steps=steps)
        for i, element in enumerate(nodes):
            style = element.get("style")
            if style:
                self._set(i, declarations(style, wanted), _INLINE)

    def of(self, element: lxml.html.HtmlElement) -> dict[str, str]:
        """The winning value of each wanted property declared for ``element``."""
        found = self._declared.get(self._position.get(element, -1))
        return {name: value for name, (_, value) in found.items()} if found else {}

    # ---------------------------------------------------------------- matching

    def _index(self) -> None:
        self._by_id: dict[str, list[int]] = defaultdict(list)
        self._by_class: dict[str, list[int]] = defaultdict(list)
        self._by_tag: dict[str, list[int]] = defaultdict(list)
        # The children of each element, and where its subtree ends: the elements are in
        # document order, so an element's descendants are the ones up to its end.
        self._children: list[list[int]] = [[] for _ in self._tags]
        self._end = list(range(1, len(self._tags) + 1))
        for i in reversed(range(len(self._tags))):
            parent = self._parent[i]
            if parent >= 0:
                self._children[parent].append(i)
                self._end[parent] = max(self._end[parent], self._end[i])
        for children in self._children:
            children.reverse()
        self._by_attr: dict[str, list[int]] = defaultdict(list)
        for i, tag in enumerate(self._tags):
            self._by_tag[tag].append(i)
            for name in self._nodes[i].keys():  # noqa: SIM118 (an lxml element)
                self._by_attr[name].append(i)
            if self._ids[i]:
                self._by_id[self._ids[i]].append(i)
            for name in self._classes[i]:
                self._by_class[name].append(i)

    def _indexed(self, compound: Compound) -> list[int] | None:
        """The elements an index lists for ``compound`` (by id, class, tag or attribute
        name), or None for one that names none of them (``*``)."""
        if compound.ids:
            return self._by_id.get(compound.ids[0], [])
        if compound.classes:
            return min((self._by_class.get(c, []) for c in compound.classes), key=len)
        if compound.tag is not None:
            return self._by_tag.get(compound.tag, [])
        if compound.attrs:
            return self._by_attr.get(compound.attrs[0][0], [])
        return None

    def _candidates(self, selector: Selector, index: int, memo: Memo, above: Memo) -> Iterable[int]:
        """The elements that may match ``selector``'s compound ``index``: those its index
        lists, or those under the elements that match the compound before it when that
        is fewer to try (``div.menu a``, ``.box *``)."""
        own = self._indexed(selector.compounds[index])
        if index == 0:
            return range(len(self._nodes)) if own is None else own
        before = self._indexed(selector.compounds[index - 1])
        child = selector.combinators[index - 1] == ">"
        if before is not None and own is not None:
            under = sum(len(self._children[i]) if child else self._end[i] - i for i in before)
            if len(own) <= under:
                return own
        elif own is not None:
            return own
        anchors = []
        for i in self._candidates(selector, index - 1, memo, above):
            self._spend()
            if self._matches_at(selector, index - 1, i, memo, above):
                anchors.append(i)
        if child:
            return [c for i in anchors for c in self._children[i]]
        return self._under(anchors)

    def _under(self, anchors: list[int]) -> Iterator[int]:
        """The elements under ``anchors`` (in document order), each once."""
        covered = 0
        for i in sorted(anchors):
            if i >= covered:  # not inside the subtree of an anchor before it
                yield from range(i + 1, self._end[i])
                covered = self._end[i]

    def _apply(self, selector: Selector, found: dict[str, tuple[str, bool]], order: int) -> None:
        ids, classes, tags = selector.specificity
        keys = ((0, 0, ids, classes, tags, order), (1, 0, ids, classes, tags, order))
        for i in self._matching(selector):
            self._set(i, found, keys)

    def _matching(self, selector: Selector) -> list[int]:
        """The elements ``selector`` matches (a selector of several rules, ``p`` or
        ``a``, is matched once)."""
        known = self._matched.get(selector)
        if known is not None:
            return known
        last = len(selector.compounds) - 1
        # Shared by the candidates: an ancestor is judged once per compound.
        memo: Memo = {}
        above: Memo = {}
        matched = []
        for i in self._candidates(selector, last, memo, above):
            self._spend()
            if self._matches_at(selector, last, i, memo, above):
                matched.append(i)
        self._matched[selector] = matched
        return matched

    def _matches_at(
        self, selector: Selector, index: int, node: int, memo: Memo, above: Memo
    ) -> bool:
        """Whether ``node`` matches the compounds of ``selector`` up to ``index``."""
        key = (index, node)
        found = memo.get(key)
        if found is None:
            self._spend()
            found = self._compound(selector.compounds[index], node)
            if found and index > 0:
                parent = self._parent[node]
                if selector.combinators[index - 1] == ">":
                    found = parent >= 0 and self._matches_at(
                        selector, index - 1, parent, memo, above
                    )
                else:
                    found = self._from_up(selector, index - 1, parent, memo, above)
            memo[key] = found
        return found

    def _from_up(self, selector: Selector, index: int, node: int, memo: Memo, above: Memo) -> bool:
        """Whether ``node`` or one of its ancestors matches the compounds up to ``index``
        (walked up once: the answer is kept for every node on the way)."""
        walked: list[int] = []
        found = False
        while node >= 0:
            known = above.get((index, node))
            if known is not None:
                found = known
                break
            walked.append(node)
            if self._matches_at(selector, index, node, memo, above):
                found = True
                break
            node = self._parent[node]
        for passed in walked:
            above[(index, passed)] = found
        return found

    def _compound(self, compound: Compound, i: int) -> bool:
        if compound.tag is not None and self._tags[i] != compound.tag:
            return False
        if compound.ids and any(self._ids[i] != name for name in compound.ids):
            return False
        if compound.classes and not self._classes[i].issuperset(compound.classes):
            return False
        element = self._nodes[i]
        for name, op, value in compound.attrs:
            got = element.get(name)
            if got is None or (op == "=" and got != value):
                return False
            if op == "~=" and value not in got.split():
                return False
        return True

    def _spend(self) -> None:
        self._steps -= 1
        if self._steps < 0:
            raise BudgetSpent

    def _set(self, i: int, found: dict[str, tuple[str, bool]], keys: tuple[Rank, Rank]) -> None:
        """Record ``found`` for element ``i`` where it wins; ``keys``: its rank when
        normal and when ``!important``."""
        declared = self._declared[i]
        for name, (value, important) in found.items():
            key = keys[important]
            held = declared.get(name)
            if held is None or key >= held[0]:
                declared[name] = (key, value)
