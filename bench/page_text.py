"""web_view's page text: what the hidden-text filter costs next to parsing and
trafilatura's extraction, in CPU seconds of this process (best of a few rounds).

Pages: the blog post of tests/tools/pages (little CSS), a made-up documentation page of
2,000 blocks (8,000 elements) with a 60 KiB <style> of 800 rules of the usual shapes
(classes, descendant and child chains, tags, universal selectors, @media), and a hostile
one: 200 levels deep, 5,000 leaves, 300 selectors of 8 compounds that all match every
level (what the matching budget bounds).

    .venv/bin/python bench/page_text.py [--rounds N]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from _common import ROOT, report

from tools.builtin import page_text


def big_page() -> str:
    shapes = (
        ".c{i} {{ color: #333; margin: 0 }}",
        ".block .c{i} > p {{ display: none; padding: 2px }}",
        "div.item-{i} a {{ color: #06c; text-decoration: none }}",
        "#id{i} span.stab {{ background: #fff; font-size: 14px }}",
        ".c{i} * {{ line-height: 1.4; opacity: .9 }}",
        "@media screen {{ .wide{i} p {{ width: 10px; overflow: hidden }} }}",
        "p {{ margin: 0 0 {i}px }}",
        "[data-x{i}] {{ left: -{i}px }}",
    )
    sheet = "\n".join(shape.format(i=i) for i in range(100) for shape in shapes)
    blocks = "".join(
        f"<div class='block item-{i % 100}'><p class='name'>Item {i} <a class='mod' href='#'>"
        f"link</a></p><span class='stab'>note {i}</span></div>"
        for i in range(2000)
    )
    return (
        f"<html><head><title>Docs</title><style>{sheet}</style></head><body><main>"
        f"<h1>Docs</h1>{blocks}</main></body></html>"
    )


def hostile_page() -> str:
    parts = ("div ", "* ", "div > ")
    sheet = "\n".join(
        "".join(parts[(i // 3**k) % 3] for k in range(6)) + "p span { color: red }"
        for i in range(300)
    )
    leaves = "<p><span>x</span></p>" * 5000
    return (
        f"<html><head><title>Deep</title><style>{sheet}</style></head><body>"
        f"{'<div>' * 200}{leaves}{'</div>' * 200}</body></html>"
    )


def cpu_best(action: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        action()
        best = min(best, time.process_time() - start)
    return best


def measure(name: str, html: str, rounds: int) -> dict[str, float]:
    parse = cpu_best(lambda: page_text._parse(html), rounds)

    def parse_and_drop() -> None:
        tree = page_text._parse(html)
        assert tree is not None
        page_text.drop_hidden(tree)

    dropped = cpu_best(parse_and_drop, rounds) - parse
    whole = cpu_best(lambda: page_text.readable_text(html, "http://example.com/"), rounds)
    print(
        f"{name}: {len(html) / 1024:.0f} KiB; parse {parse * 1000:.0f} ms, hidden-text "
        f"filter {dropped * 1000:.0f} ms, readable_text in all {whole * 1000:.0f} ms "
        f"(the filter: {100 * dropped / whole:.0f}%)"
    )
    return {f"{name}_filter_ms": dropped * 1000, f"{name}_total_ms": whole * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    blog = (ROOT / "tests" / "tools" / "pages" / "blog_post.html").read_text()
    figures = measure("blog_post", blog, args.rounds)
    figures |= measure("docs_8000_elements", big_page(), args.rounds)
    figures |= measure("hostile_deep", hostile_page(), args.rounds)
    report(figures)


if __name__ == "__main__":
    main()
