"""Markdown beyond the basics, in a real browser under the page's policy: a table's
right-aligned columns, task-list checkboxes, and LaTeX typeset by the vendored KaTeX."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.support.fake_llm import Reply
from tests.web.conftest import LLMScript, NaviPage
from tests.web.test_csp import violations
from tests.web.views import shoot_all

ANSWER = r"""Prices:

| Item | Count | Price |
|:-----|:-----:|------:|
| Apple | 3 | 1.50 |
| Melon | 12 | 10.25 |

Steps:

- [x] buy fruit
- [ ] cut it

Euler: $e^{i\pi} + 1 = 0$ and \(a^2 + b^2 = c^2\), but $5 and $10 are money.

$$\int_0^1 x^2\,dx = \frac{1}{3}$$

\[\sum_{k=1}^{n} k = \frac{n(n+1)}{2}\]

Inline display $$x^2$$ in a sentence keeps it whole.

Broken: $\frac{1}{$ stays text. Code keeps dollars: `$HOME`.
"""


def test_tables_tasks_and_latex(navi_page: NaviPage, llm: LLMScript) -> None:
    refused = violations(navi_page.page)
    llm(Reply(text=ANSWER))
    ui = navi_page.open()
    ui.send("Show me markdown extras")
    ui.wait_idle()
    answer = ui.page.locator(".message.assistant .text-block").last

    price = answer.locator("td").nth(2)
    expect(price).to_have_text("1.50")
    expect(price).to_have_class("align-right")
    assert price.evaluate("(td) => getComputedStyle(td).textAlign") == "right"
    assert answer.locator("td").nth(1).evaluate("(td) => getComputedStyle(td).textAlign") == (
        "center"
    )
    assert answer.locator("[align]").count() == 0

    boxes = answer.get_by_role("checkbox")
    expect(boxes).to_have_count(2)
    expect(boxes.nth(0)).to_be_checked()
    expect(boxes.nth(1)).not_to_be_checked()
    expect(boxes.nth(0)).to_be_disabled()
    expect(answer.locator("input")).to_have_count(0)

    # Two inline formulas, three displayed ones, all typeset (KaTeX loaded on demand).
    expect(answer.locator(".math-inline .katex")).to_have_count(2)
    expect(answer.locator(".math-display .katex-display")).to_have_count(3)
    expect(answer.locator("p", has_text="Inline display")).to_contain_text(
        "in a sentence keeps it whole."
    )
    expect(answer.locator(".math-inline").first).to_contain_text("π")
    expect(answer).to_contain_text("but $5 and $10 are money.")
    expect(answer.locator("code", has_text="$HOME")).to_have_count(1)
    # The fonts come from Navi itself (vendor/katex/fonts), as the policy allows.
    loaded = ui.page.evaluate(
        "document.fonts.ready.then(() => [...document.fonts].filter("
        "(f) => f.family.startsWith('KaTeX') && f.status === 'loaded').length)"
    )
    assert loaded >= 1
    shoot_all(ui, "markdown", before=lambda page: answer.scroll_into_view_if_needed())

    # The history draws the same.
    ui.page.reload()
    ui.page.wait_for_selector("#profile-select option", state="attached")
    again = ui.page.locator(".message.assistant .text-block").last
    expect(again.locator(".katex")).to_have_count(5)
    expect(again.get_by_role("checkbox")).to_have_count(2)
    assert refused == [], refused
