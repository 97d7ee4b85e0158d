"""Text a person does not see on a page, removed before the model reads the page.

A page can hide instructions for the LLM where no reader sees them; what a person does
not see, the model does not read either. Dropped, from the ``style`` attributes and the
``<style>`` rules a page-only reader can apply (tools/builtin/css.py):

- not rendered: ``display:none``, ``visibility:hidden``, ``<template>``, the ``hidden``
  attribute, ``aria-hidden="true"``, the usual "hidden" classes;
- invisible: ``opacity`` under 0.1, a font size of a pixel or less (``font: 0/0 a``);
- off-screen: ``left``/``top``/``right``/``bottom``, ``margin``, ``text-indent`` or a
  translation of -500 px or less (or 10000 px and more, or -100%);
- clipped: ``clip: rect()`` with nothing inside, ``clip-path`` of ``inset(50%)`` or
  more, ``circle(0)``, a zero ``ellipse()``, a flat ``polygon()``;
- shrunk: ``transform: scale()`` (or ``scale``) under 0.1, a flat ``matrix()``; a box of
  a pixel or less (``width``, ``height``, ``max-*``) with ``overflow`` hidden or clipped;
- the colour of its background: text whose colour (alpha included) is within 10/255
  of the background it is painted on (the nearest ancestor's that sets one, else the
  white page; ``bgcolor`` and ``<font color>`` too), and ``color: transparent``.

Defence in depth, not a guarantee: there is no layout engine, so text hidden by what
only layout or scripts reveal (linked stylesheets, pseudo-classes, media features,
text behind another box, a script that moves it) still gets through. What holds
whatever a page says is that tools which act ask a person first.
"""

from __future__ import annotations

import lxml.html

from tools.builtin import css_values as values
from tools.builtin.css_cascade import Cascade
from tools.builtin.css_values import BLACK, RGBA, WHITE

# Classes that mean "not shown" in the common CSS frameworks (Bootstrap, Tailwind, WordPress).
HIDDEN_CLASSES = frozenset(
    {"hidden", "d-none", "sr-only", "visually-hidden", "screen-reader-text", "invisible"}
)
_OFFSETS = ("left", "right", "top", "bottom", "margin-left", "margin-top", "text-indent")
_SIZES = ("width", "height", "max-width", "max-height")
_OVERFLOWS = ("overflow", "overflow-x", "overflow-y")
# The properties read: the cascade keeps no others.
WANTED = frozenset(
    {
        "display",
        "visibility",
        "opacity",
        "font",
        "font-size",
        "color",
        "background",
        "background-color",
        "text-shadow",
        "inset",
        "margin",
        "transform",
        "translate",
        "scale",
        "clip",
        "clip-path",
        *_OFFSETS,
        *_SIZES,
        *_OVERFLOWS,
    }
)
_INHERIT = frozenset({"inherit", "currentcolor", "unset", "revert", "revert-layer"})
_NO_BACKGROUND = frozenset({"none", "transparent", "initial", "unset", "inherit"})


def drop_hidden(tree: lxml.html.HtmlElement) -> None:
    """Remove every element a browser would not show, and the text painted in its
    background's colour (an element's tail text stays: it belongs to its parent)."""
    cascade = Cascade(tree, WANTED)
    # (element, its inherited text colour, the background it is painted on); None: not
    # known (a variable, an image), so never taken as hiding.
    stack: list[tuple[lxml.html.HtmlElement, RGBA | None, RGBA | None]] = [(tree, BLACK, WHITE)]
    while stack:
        element, inherited, below = stack.pop()
        style = cascade.of(element)
        if element.getparent() is not None and is_hidden(element, style):
            element.drop_tree()
            continue
        colour = _text_colour(element, style, inherited)
        background = _background(element, style, below)
        if _unseen_text(style, colour, background):
            element.text = None
            for child in element:
                child.tail = None
        stack.extend((child, colour, background) for child in element if isinstance(child.tag, str))


def is_hidden(element: lxml.html.HtmlElement, style: dict[str, str]) -> bool:
    """Whether a browser shows nothing of ``element`` (and so of its children)."""
    if element.tag == "template" or element.get("hidden") is not None:
        return True
    if (element.get("aria-hidden") or "").strip().lower() == "true":
        return True
    classes = element.get("class")
    if classes and not HIDDEN_CLASSES.isdisjoint(classes.split()):
        return True
    if not style:
        return False
    return _not_rendered(style) or _out_of_sight(style) or _clipped_or_shrunk(style)


def _not_rendered(style: dict[str, str]) -> bool:
    if style.get("display", "").lower() == "none":
        return True
    if style.get("visibility", "").lower() in ("hidden", "collapse"):
        return True
    opacity = values.number(style.get("opacity", "1"))
    if opacity is not None and opacity < values.INVISIBLE:
        return True
    if "font-size" in style and values.is_tiny(style["font-size"]):
        return True
    # The size in the ``font`` shorthand: ``font: 0/0 a``, ``bold 1px/1 serif``.
    for token in style.get("font", "").split():
        size = token.split("/", 1)[0]
        if values.length_px(size) is not None and values.is_tiny(size):
            return True
    return False


def _out_of_sight(style: dict[str, str]) -> bool:
    if any(values.is_far(style[name]) for name in _OFFSETS if name in style):
        return True
    for shorthand in ("inset", "margin"):
        sides = style.get(shorthand, "").split()
        if 1 <= len(sides) <= 4:
            top, _, _, left = values.four_sides(sides)
            if values.is_far(top) or values.is_far(left):
                return True
    return False


def _clipped_or_shrunk(style: dict[str, str]) -> bool:
    checks = (
        ("transform", values.transform_hides),
        ("translate", values.translate_hides),
        ("scale", values.scale_hides),
        ("clip", values.clip_hides),
        ("clip-path", values.clip_path_hides),
    )
    if any(name in style and hides(style[name]) for name, hides in checks):
        return True
    overflow = {word for name in _OVERFLOWS for word in style.get(name, "").lower().split()}
    if overflow & {"hidden", "clip"}:
        return any(values.is_tiny(style[name]) for name in _SIZES if name in style)
    return False


def _text_colour(
    element: lxml.html.HtmlElement, style: dict[str, str], inherited: RGBA | None
) -> RGBA | None:
    declared = style.get("color")
    if not declared and element.tag == "font":
        declared = element.get("color")
    if not declared:
        return inherited
    text = declared.strip().lower()
    if text in _INHERIT:
        return inherited
    if text == "initial":
        return BLACK
    return values.colour(text)


def _background(
    element: lxml.html.HtmlElement, style: dict[str, str], below: RGBA | None
) -> RGBA | None:
    declared = style.get("background-color") or style.get("background") or element.get("bgcolor")
    if not declared or declared.strip().lower() in _NO_BACKGROUND:
        return below
    painted = values.first_colour(declared)
    if painted is None:
        return None  # an image, a gradient, a variable: what is behind the text is unknown
    if painted[3] >= 1:
        return painted
    if below is None:
        return None
    return values.over(painted, below)


def _unseen_text(style: dict[str, str], colour: RGBA | None, background: RGBA | None) -> bool:
    if colour is None or background is None:
        return False
    if style.get("text-shadow", "none").strip().lower() != "none":
        return False  # a shadow can draw the text in another colour
    return values.unseen_on(colour, background)
