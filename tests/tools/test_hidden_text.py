"""The hidden-text filter's CSS: which rules apply, which win, which colours hide, and
the limits that keep a hostile page from making it slow (tools/builtin/css_cascade.py,
hidden_text.py). The tricks themselves, through web_view on a real server:
tests/security/test_hidden_text.py."""

from __future__ import annotations

import lxml.html
import pytest
from prompt_toolkit.styles.named_colors import NAMED_COLORS

from tools.builtin.css_cascade import MAX_MATCH_STEPS, MAX_NESTING, Cascade
from tools.builtin.hidden_text import WANTED, drop_hidden, is_hidden


def visible_text(body: str, sheet: str = "") -> str:
    """The text left of ``body`` once hidden text is dropped, spaces squeezed."""
    tree = lxml.html.document_fromstring(
        f"<html><head><style>{sheet}</style></head><body>{body}</body></html>"
    )
    drop_hidden(tree)
    return " ".join(tree.body.text_content().split())


@pytest.mark.parametrize(
    ("sheet", "body", "seen"),
    [
        # The more specific rule wins; at equal specificity the later one.
        ("#a { left: -9999px } .b { left: 0 }", '<p id="a" class="b">x</p>', ""),
        (".b { left: 0 } p.b { left: -9999px }", '<p class="b">x</p>', ""),
        ("p.b { left: -9999px } .b.c { left: 0 }", '<p class="b c">x</p>', "x"),
        (".b { left: -9999px } .b { left: 0 }", '<p class="b">x</p>', "x"),
        ("#m p { left: 0 } div.x.y.z p { left: -9999px }", '<div id="m" class="x y z"><p>x', "x"),
        # The style attribute beats a rule, an !important rule beats the attribute.
        (".b { left: -9999px }", '<p class="b" style="left: 0">x</p>', "x"),
        (".b { left: -9999px !important }", '<p class="b" style="left: 0">x</p>', ""),
        (".b { left: 0 !important }", '<p class="b" style="left:-9999px !important">x</p>', ""),
        # Combinators: descendant, child; attributes.
        ("div span { color: white }", "<div><p><span>x</span></p></div>", ""),
        ("div > span { color: white }", "<div><p><span>x</span></p></div>", "x"),
        ("div > p > span { color: white }", "<div><p><span>x</span></p></div>", ""),
        # A child run under a descendant one: the nearest div whose parent is a section.
        (
            "section > div span { opacity: 0 }",
            "<section><div><div><span>x</span></div></div></section><div><span>y</span></div>",
            "y",
        ),
        (
            "article span > b i { opacity: 0 }",
            "<article><span><b><span><i>x</i></span></b></span></article><span><b><i>y</i>",
            "y",
        ),
        ('[data-x="1"] { opacity: 0 }', '<p data-x="1">x</p><p data-x="2">y</p>', "y"),
        ("[lang~=en] { opacity: 0 }", '<p lang="de en">x</p>', ""),
        ("P.B { opacity: 0 }", '<p class="B">x</p>', ""),  # tags are case-blind, classes not
        (".b { opacity: 0 }", '<p class="B">x</p>', "x"),
        # Negation and matches of simple selectors; the root.
        ("p:not(.c) { opacity: 0 }", '<p class="c">x</p><p>y</p>', "x"),
        ("div :is(b, i) { opacity: 0 }", "<div><b>x</b><i>y</i><u>z</u></div>", "z"),
        (":root > body > p:where(.b) { opacity: 0 }", '<p class="b">x</p><p>y</p>', "y"),
        # Selectors we cannot judge are skipped, never guessed at: a state, a place among
        # siblings, a sibling, a pseudo-element (generated text, not the element's own).
        (".b:hover { opacity: 0 }", '<p class="b">x</p>', "x"),
        (".b:not(:focus) { opacity: 0 }", '<p class="b">x</p>', "x"),
        ("h1 + p { opacity: 0 }", "<h1>t</h1><p>x</p>", "tx"),
        ("h1 ~ p { opacity: 0 }", "<h1>t</h1><p>x</p>", "tx"),
        ("p:nth-child(2) { opacity: 0 }", "<p>x</p><p>y</p>", "xy"),
        ("div:has(p) { opacity: 0 }", "<div><p>x</p></div>", "x"),
        ("p:not(div p) { opacity: 0 }", "<p>x</p>", "x"),
        (".b::before { display: none }", '<p class="b">x</p>', "x"),
        ("ns|p { opacity: 0 }", "<p>x</p>", "x"),
        (".a, .b:hover { opacity: 0 }", '<p class="a">x</p><p class="b">y</p>', "y"),
        (".a, .b:nth-child(2) { opacity: 0 }", '<p class="a">x</p><p class="b">y</p>', "y"),
        # A selector list that does not parse is dropped whole, as a browser does.
        (".a, .b!x { opacity: 0 }", '<p class="a">x</p>', "x"),
        # Media: a screen applies, print and features do not; @supports applies.
        ("@media screen { .b { opacity: 0 } }", '<p class="b">x</p>', ""),
        ("@media print { .b { opacity: 0 } }", '<p class="b">x</p>', "x"),
        ("@media (max-width: 9px) { .b { opacity: 0 } }", '<p class="b">x</p>', "x"),
        ("@supports (display: grid) { .b { opacity: 0 } }", '<p class="b">x</p>', ""),
        ("/* .b { opacity: 0 } */ .c { opacity: 0 }", '<p class="b">x</p>', "x"),
        ('@import "x.css"; .b { opacity: 0 }', '<p class="b">x</p>', ""),
        ('.q::after { content: "}" } .b { opacity: 0 }', '<p class="b">x</p>', ""),
    ],
)
def test_which_rules_apply_and_win(sheet: str, body: str, seen: str) -> None:
    assert visible_text(body, sheet) == seen


def test_a_print_style_element_does_not_apply() -> None:
    html = '<html><head><style media="print">p { opacity: 0 }</style></head><body><p>x</p>'
    tree = lxml.html.document_fromstring(html)
    drop_hidden(tree)
    assert tree.body.text_content() == "x"


@pytest.mark.parametrize(
    ("body", "seen"),
    [
        ('<p style="color: white">x</p>', ""),
        ('<p style="color: #fafafa">x</p>', ""),  # within 10/255 of white
        ('<p style="color: #eee">x</p>', "x"),  # faint, still seen
        ('<p style="color: rgba(0, 0, 0, 0.02)">x</p>', ""),  # black, nearly transparent
        ('<p style="color: hsl(0, 0%, 100%)">x</p>', ""),
        ('<p style="color: rgb(0 0 0 / 2%)">x</p>', ""),
        ('<p style="color: hwb(0 100% 0%)">x</p>', ""),
        ('<p style="color: color()">x</p>', "x"),  # not a colour (tinycss2 raises on it)
        ('<div style="background: #000; color: #fff"><p style="color: #000">x</p>y</div>', "y"),
        ('<div style="background: #000"><p style="color: #fff">x</p>y</div>', "x"),
        ('<div style="background: rgba(0,0,0,.5)"><p style="color: rgb(128,128,128)">x</p>', ""),
        ('<div style="background: #000 url(a.png)"><p style="color: #000">x</p></div>', ""),
        # What is behind the text is not known: an image alone, a gradient, a variable.
        ('<div style="background: url(a.png)"><p style="color: #fff">x</p></div>', "x"),
        ('<div style="background: linear-gradient(#fff, #000)"><p style="color:#fff">x', "x"),
        ('<div style="background: var(--bg)"><p style="color: #fff">x</p></div>', "x"),
        ('<p style="color: var(--ink)">x</p>', "x"),
        ('<p style="color: transparent; text-shadow: 0 0 0 #000">x</p>', "x"),
        # Inherited colour, its own text only: a child with a colour of its own shows.
        ('<div style="color: #fff">x<b style="color: #000">y</b>z</div>', "y"),
        ('<div style="color: #fff"><p style="color: inherit">x</p></div>', ""),
        ("<table bgcolor=navy><tr><td><font color=#000080>x</font></td></tr></table>", ""),
    ],
)
def test_text_the_colour_of_its_background(body: str, seen: str) -> None:
    assert visible_text(body) == seen


@pytest.mark.parametrize(
    ("style", "hidden"),
    [
        ("left: -9999px", True),
        ("left: -10px", False),
        ("top: -60em", True),
        ("margin: -9999px 0 0 0", True),
        ("margin: 0 auto", False),
        ("inset: 0 0 0 -100%", True),
        ("text-indent: -2em", False),
        ("transform: translate(-120vw, 0)", True),
        ("transform: rotate(10deg) scale(1.5)", False),
        ("transform: scaleY(0.05)", True),
        ("transform: matrix(0, 0, 0, 0, 0, 0)", True),
        ("transform: matrix(1, 0, 0, 1, 0, 0)", False),
        ("translate: 0 -100vh", True),
        ("clip: rect(0 0 0 0)", True),
        ("clip: rect(0, 100px, 20px, 0)", False),
        ("clip: rect(auto, auto, auto, auto)", False),
        ("clip-path: inset(50%)", True),
        ("clip-path: inset(10% 20%)", False),
        ("clip-path: inset(0 0 0 50%)", False),
        ("clip-path: ellipse(0 10px at 50% 50%)", True),
        ("clip-path: polygon(0 0, 0 0, 0 0)", True),
        ("clip-path: polygon(0 0, 100% 0, 100% 100%)", False),
        ("width: 0; overflow: hidden", True),
        ("width: 0", False),  # its text overflows, and shows
        ("height: 1px; overflow: auto hidden", True),
        ("opacity: 5%", True),
        ("opacity: .5", False),
        ("font: italic bold 12px/30px Georgia, serif", False),
        ("visibility: collapse", True),
        ("DISPLAY : NONE !important", True),
    ],
)
def test_what_hides_a_box(style: str, hidden: bool) -> None:
    body = f'<p>a</p><p style="{style}">x</p><p>b</p>'
    assert visible_text(body) == ("ab" if hidden else "axb")


def test_a_dropped_elements_tail_text_stays() -> None:
    body = '<p>Seen <span style="left:-9999px">x</span>and kept.</p>'
    assert visible_text(body) == "Seen and kept."


def test_a_hostile_style_sheet_is_read_within_bounds() -> None:
    # Nesting past the limit is skipped (no recursion error), and a huge sheet of
    # rules that match everything is read to its limits, not to its end.
    nested = "@supports (a) {" * (MAX_NESTING + 50) + ".b { opacity: 0 }" + "}" * 60
    assert visible_text('<p class="b">x</p>', nested) == "x"
    brackets = ":is(" * 300 + ".b" + ")" * 300 + " { opacity: 0 }"
    assert visible_text('<p class="b">x</p>', brackets) == "x"
    many = "* * * * * * * p { color: red }\n" * 20_000 + ".b { opacity: 0 }"
    body = "<div>" * 30 + '<p class="b">x</p><p>y</p>' + "</div>" * 30
    assert visible_text(body, many) in ("y", "xy")


def test_style_attributes_are_read_within_bounds() -> None:
    # The same text is read once; distinct ones up to MAX_CSS_CHARS, past which the rest
    # of the page's style attributes are not read.
    same = '<p style="left: -9999px">x</p>' * 20_000
    assert visible_text(same + "<p>y</p>") == "y"
    styles = [f'<p style="color: #{i:06x}; /* {"." * 1000} */">p</p>' for i in range(300)]
    hidden = '<p style="left: -9999px">x</p>'
    assert "x" not in visible_text(hidden + "".join(styles[:100]) + hidden)
    assert visible_text(hidden + "".join(styles) + hidden).count("x") == 1


def test_a_spent_budget_leaves_the_remaining_rules_unapplied() -> None:
    html = (
        "<html><head><style>.a { opacity: 0 }</style></head><body>"
        '<p class="a">x</p><p style="opacity: 0">y</p><p>z</p></body></html>'
    )
    for steps, seen in ((MAX_MATCH_STEPS, ["z"]), (1, ["x", "z"])):
        tree = lxml.html.document_fromstring(html)
        cascade = Cascade(tree, WANTED, steps=steps)
        assert [p.text for p in tree.iter("p") if not is_hidden(p, cascade.of(p))] == seen


def test_every_named_colour_is_known() -> None:
    # Text in a named colour's own hex code on that colour (prompt_toolkit's table, CSS's).
    for name, value in NAMED_COLORS.items():
        body = f'<div style="background: {name}"><p style="color: {value}">x</p></div>'
        assert visible_text(body) == "", name
