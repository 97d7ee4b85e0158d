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
from collections.abc import Sequence

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
                self._set(i, declarations(style, wanted), (1, 0, 0, 0), 0)

    def of(self, element: lxml.html.HtmlElement) -> dict[str, str]:
        """The winning value of each wanted property declared for ``element``."""
        found = self._declared.get(self._position.get(element, -1))
        return {name: value for name, (_, value) in found.items()} if found else {}

    # ---------------------------------------------------------------- matching

    def _index(self) -> None:
        self._by_id: dict[str, list[int]] = defaultdict(list)
        self._by_class: dict[str, list[int]] = defaultdict(list)
        self._by_tag: dict[str, list[int]] = defaultdict(list)
        for i, tag in enumerate(self._tags):
            self._by_tag[tag].append(i)
            if self._ids[i]:
                self._by_id[self._ids[i]].append(i)
            for name in self._classes[i]:
                self._by_class[name].append(i)

    def _candidates(self, compound: Compound) -> Sequence[int]:
        if compound.ids:
            return self._by_id.get(compound.ids[0], [])
        if compound.classes:
            return min((self._by_class.get(c, []) for c in compound.classes), key=len)
        if compound.tag is not None:
            return self._by_tag.get(compound.tag, [])
        return range(len(self._nodes))

    def _apply(self, selector: Selector, found: dict[str, tuple[str, bool]], order: int) -> None:
        rank = (0, *selector.specificity)
        last = len(selector.compounds) - 1
        # Shared by the candidates: an ancestor is judged once per compound.
        memo: dict[tuple[int, int], bool] = {}
        above: dict[tuple[int, int], bool] = {}
        for i in self._candidates(selector.compounds[last]):
            self._spend()
            if self._matches_at(selector, last, i, memo, above):
                self._set(i, found, rank, order)

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

    def _set(
        self,
        i: int,
        found: dict[str, tuple[str, bool]],
        rank: tuple[int, int, int, int],
        order: int,
    ) -> None:
        declared = self._declared[i]
        for name, (value, important) in found.items():
            key: Rank = (int(important), *rank, order)
            if name not in declared or key >= declared[name][0]:
                declared[name] = (key, value)
