"""Text a person does not see on a page, removed before the model reads the page.

A page can hide instructions for the LLM where no reader sees them; what a person does
not see, the model does not read either. Dropped, from the ``style`` attributes and the
``<style>`` rules a page-only reader can apply (tools/builtin/css_cascade.py):

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

There is no layout engine: a length relative to what we do not know is judged by the
usual assumptions (16 px to the em, a 1280 x 800 viewport), a percentage of a width is
not judged, and a value we cannot read (``calc()``, ``var()``) is never taken as hiding.
So this is defence in depth, not a guarantee: text hidden by what only layout or scripts
reveal (linked stylesheets, pseudo-classes, media features, text behind another box, a
script that moves it) still gets through. What holds whatever a page says is that tools
which act ask a person first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import lxml.html
import tinycss2
import tinycss2.color4

from tools.builtin.css_cascade import Cascade, Tokens, significant

# r, g, b in 0..255 and alpha in 0..1.
RGBA = tuple[float, float, float, float]
WHITE: RGBA = (255.0, 255.0, 255.0, 1.0)
BLACK: RGBA = (0.0, 0.0, 0.0, 1.0)

# Classes that mean "not shown" in the common CSS frameworks (Bootstrap, Tailwind, WordPress).
HIDDEN_CLASSES = frozenset(
    {"hidden", "d-none", "sr-only", "visually-hidden", "screen-reader-text", "invisible"}
)
# How far off-screen an offset must put a box to count as hidden: further left or up
# than any layout puts text a reader sees, or far beyond the right or bottom edge.
FAR_BEFORE_PX = -500.0
FAR_AFTER_PX = 10_000.0
# Below this a scale factor, an opacity or a text colour's alpha leaves nothing readable.
INVISIBLE = 0.1
# A text colour this close to its background (on every channel, of 255) is not seen.
SAME_COLOUR = 10.0

_OFFSETS = ("left", "right", "top", "bottom", "margin-left", "margin-top", "text-indent")
_SIZES = ("width", "height", "max-width", "max-height")
_OVERFLOWS = ("overflow", "overflow-x", "overflow-y")
# The properties read: the cascade keeps no others.
WANTED = frozenset(
    {
        *("display", "visibility", "opacity", "font", "font-size", "color", "text-shadow"),
        *("background", "background-color", "inset", "margin", "transform", "translate"),
        *("scale", "clip", "clip-path", *_OFFSETS, *_SIZES, *_OVERFLOWS),
    }
)
_INHERIT = frozenset({"inherit", "currentcolor", "unset", "revert", "revert-layer"})
_NO_BACKGROUND = frozenset({"none", "transparent", "initial", "unset", "inherit"})
_EM_PX = 16.0
_VIEWPORT = (1280.0, 800.0)
_UNIT_PX = {
    **{"px": 1.0, "em": _EM_PX, "rem": _EM_PX, "ex": _EM_PX / 2, "ch": _EM_PX / 2},
    **{"pt": 4 / 3, "pc": 16.0, "in": 96.0, "cm": 96 / 2.54, "mm": 96 / 25.4, "q": 96 / 101.6},
    **{"vw": _VIEWPORT[0] / 100, "vh": _VIEWPORT[1] / 100},
    **{"vmin": min(_VIEWPORT) / 100, "vmax": max(_VIEWPORT) / 100},
}

Style = dict[str, Tokens]


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


def is_hidden(element: lxml.html.HtmlElement, style: Style) -> bool:
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


def _not_rendered(style: Style) -> bool:
    if _keyword(style.get("display")) == "none":
        return True
    if _keyword(style.get("visibility")) in ("hidden", "collapse"):
        return True
    opacity = _one(style.get("opacity"))
    if opacity is not None and (value := _number(opacity)) is not None and value < INVISIBLE:
        return True
    size = _one(style.get("font-size"))
    if size is not None and _is_tiny(size):
        return True
    # The size in the ``font`` shorthand: ``font: 0/0 a``, ``bold 1px/1 serif`` (the
    # line height, after the slash, does not count).
    font = style.get("font", ())
    for before, token in zip((None, *font), font, strict=False):
        if before != "/" and _length_px(token) is not None and _is_tiny(token):
            return True
    return False


def _out_of_sight(style: Style) -> bool:
    for name in _OFFSETS:
        offset = _one(style.get(name))
        if offset is not None and _is_far(offset):
            return True
    for shorthand in ("inset", "margin"):
        sides = style.get(shorthand, ())
        if 1 <= len(sides) <= 4:
            top, _, _, left = _four_sides(sides)
            if _is_far(top) or _is_far(left):
                return True
    return False


def _clipped_or_shrunk(style: Style) -> bool:
    checks: tuple[tuple[str, Callable[[Tokens], bool]], ...] = (
        ("transform", _transform_hides),
        ("translate", lambda value: any(_is_far(v) for v in value[:2])),
        ("scale", lambda value: any(_flat(_number(v)) for v in value)),
        ("clip", _clip_hides),
        ("clip-path", _clip_path_hides),
    )
    if any(name in style and hides(style[name]) for name, hides in checks):
        return True
    overflow = {_keyword((token,)) for name in _OVERFLOWS for token in style.get(name, ())}
    if overflow & {"hidden", "clip"}:
        sizes = (_one(style.get(name)) for name in _SIZES)
        return any(size is not None and _is_tiny(size) for size in sizes)
    return False


# ---------------------------------------------------------------- transforms and clips


def _transform_hides(value: Tokens) -> bool:
    """A scale near 0, a flat matrix, or a move far out of sight."""
    for name, args in _functions(value):
        if name in ("scale", "scalex", "scaley", "scale3d"):
            if any(_flat(_number(a)) for a in (args[:2] if name == "scale3d" else args)):
                return True
        elif name in ("translate", "translatex", "translatey", "translate3d"):
            if any(_is_far(a) for a in args[:2]):
                return True
        elif name == "matrix" and len(args) == 6:
            a, b, c, d, tx, ty = (math.nan if v is None else v for v in map(_number, args))
            if abs(a * d - b * c) < INVISIBLE**2:  # False when a value is unknown (nan)
                return True
            if any(not math.isnan(t) and _far_px(t) for t in (tx, ty)):
                return True
    return False


def _clip_hides(value: Tokens) -> bool:
    """``clip: rect(top, right, bottom, left)`` with nothing inside it."""
    for name, args in _functions(value):
        if name == "rect" and len(args) == 4:
            top, right, bottom, left = map(_length_px, args)
            if top is not None and bottom is not None and bottom <= top:
                return True
            if left is not None and right is not None and right <= left:
                return True
    return False


def _clip_path_hides(value: Tokens) -> bool:
    """``inset()`` of 50% a side or more, ``circle(0)``, an ``ellipse()`` with a zero
    radius, a ``polygon()`` of no area."""
    for name, args in _functions(value):
        if name == "inset" and args and _inset_hides(_until(args, "round")):
            return True
        if name in ("circle", "ellipse"):
            radii = _until(args, "at")
            if any(_length_px(r) == 0 or _percent(r) == 0 for r in radii):
                return True
        if name == "polygon" and _polygon_is_flat(args):
            return True
    return False


def _inset_hides(sides: list[Any]) -> bool:
    # 1 to 4 values, as for margins: top, right, bottom, left. A side of 50% or more and
    # its opposite meet; a side of 1000 px or more cuts away any line of text.
    top, right, bottom, left = _four_sides(sides)
    for one, other in ((top, bottom), (right, left)):
        if sum(_percent(v) or 0 for v in (one, other)) >= 100:
            return True
        if any((_length_px(v) or 0) >= 1000 for v in (one, other)):
            return True
    return False


def _polygon_is_flat(args: list[Any]) -> bool:
    if args and _keyword(args[:1]) in ("nonzero", "evenodd"):
        args = args[1:]
    # Only points all in % or all in lengths: mixed, their area depends on the box.
    kind = _percent if args and args[0].type == "percentage" else _length_px
    coords = [kind(a) for a in args]
    if len(coords) < 2 or len(coords) % 2 or None in coords:
        return False
    known = [c for c in coords if c is not None]
    xs, ys, n = known[::2], known[1::2], len(known) // 2
    area = sum(xs[i] * ys[(i + 1) % n] - xs[(i + 1) % n] * ys[i] for i in range(n))
    return math.isclose(area, 0.0, abs_tol=1e-9)


# ---------------------------------------------------------------- colours


def _text_colour(
    element: lxml.html.HtmlElement, style: Style, inherited: RGBA | None
) -> RGBA | None:
    declared = style.get("color")
    if not declared and element.tag == "font" and element.get("color"):
        declared = significant(tinycss2.parse_component_value_list(element.get("color")))
    if not declared:
        return inherited
    if _keyword(declared) in _INHERIT:
        return inherited
    if _keyword(declared) == "initial":
        return BLACK
    return _colour(declared[0]) if len(declared) == 1 else None


def _background(element: lxml.html.HtmlElement, style: Style, below: RGBA | None) -> RGBA | None:
    declared = style.get("background-color") or style.get("background")
    if not declared and element.get("bgcolor"):
        declared = significant(tinycss2.parse_component_value_list(element.get("bgcolor")))
    if not declared or _keyword(declared) in _NO_BACKGROUND:
        return below
    # The colour in a shorthand: ``background: #fff url(x.png) no-repeat``.
    painted = next((c for c in map(_colour, declared) if c is not None), None)
    if painted is None:
        return None  # an image, a gradient, a variable: what is behind the text is unknown
    if painted[3] >= 1:
        return painted
    return None if below is None else _over(painted, below)


def _unseen_text(style: Style, colour: RGBA | None, background: RGBA | None) -> bool:
    if colour is None or background is None:
        return False
    shadow = style.get("text-shadow")
    if shadow and _keyword(shadow) != "none":
        return False  # a shadow can draw the text in another colour
    seen = _over(colour, background)
    return max(abs(seen[i] - background[i]) for i in range(3)) <= SAME_COLOUR


def _colour(token: Any) -> RGBA | None:
    """A colour (a name, ``#hex``, ``rgb()``, ``hsl()``, ``hwb()``, ``transparent``); None
    when it is not one, is relative (``currentcolor``) or in a space we do not convert."""
    try:
        parsed = tinycss2.color4.parse_color(token)
    except ValueError:  # tinycss2 1.5 on an empty ``color()``
        return None
    if not isinstance(parsed, tinycss2.color4.Color):
        return None
    if parsed.space in ("hsl", "hwb"):
        parsed = parsed.to("srgb")
    if parsed.space != "srgb":
        return None
    r, g, b = (255 * max(0.0, min(1.0, c or 0.0)) for c in parsed.coordinates)
    return (r, g, b, parsed.alpha)


def _over(top: RGBA, below: RGBA) -> RGBA:
    """``top`` painted over the opaque ``below``."""
    alpha = top[3]
    r, g, b = (alpha * top[i] + (1 - alpha) * below[i] for i in range(3))
    return (r, g, b, 1.0)


# ---------------------------------------------------------------- numbers and lengths


def _one(value: Sequence[Any] | None) -> Any:
    """The value's only token, or None."""
    return value[0] if value is not None and len(value) == 1 else None


def _keyword(value: Sequence[Any] | None) -> str:
    token = _one(value)
    return token.lower_value if token is not None and token.type == "ident" else ""


def _number(token: Any) -> float | None:
    """A plain number, or a percentage as a fraction (``50%`` → 0.5)."""
    if token.type == "number":
        return float(token.value)
    return token.value / 100 if token.type == "percentage" else None


def _percent(token: Any) -> float | None:
    return float(token.value) if token.type == "percentage" else None


def _length_px(token: Any) -> float | None:
    """A length in px (``0`` without a unit too); None for a percentage, ``auto``, a
    ``calc()`` or anything else whose size we cannot know."""
    if token.type == "number":
        return 0.0 if token.value == 0 else None
    factor = _UNIT_PX.get(token.lower_unit) if token.type == "dimension" else None
    return None if factor is None else token.value * factor


def _is_far(token: Any) -> bool:
    """An offset that moves a box out of sight: far before the page's start, or far
    beyond its end."""
    px = _length_px(token)
    if px is not None:
        return _far_px(px)
    share = _percent(token)
    return share is not None and share <= -100


def _far_px(px: float) -> bool:
    return px <= FAR_BEFORE_PX or px >= FAR_AFTER_PX


def _is_tiny(token: Any) -> bool:
    """A size (``width``, ``font-size``) of at most one pixel."""
    px = _length_px(token)
    if px is not None:
        return px <= 1.0
    share = _percent(token)
    return share is not None and share <= 0


def _flat(factor: float | None) -> bool:
    return factor is not None and abs(factor) < INVISIBLE


def _functions(value: Tokens) -> Iterator[tuple[str, list[Any]]]:
    """The functions of a value and their arguments, without the commas and slashes."""
    for token in value:
        if token.type == "function":
            yield token.lower_name, [a for a in significant(token.arguments) if a.type != "literal"]


def _until(args: list[Any], word: str) -> list[Any]:
    """``args`` up to the keyword ``word`` (``inset(10% round 5px)``)."""
    for i, arg in enumerate(args):
        if arg.type == "ident" and arg.lower_value == word:
            return args[:i]
    return args


def _four_sides(values: Sequence[Any]) -> tuple[Any, Any, Any, Any]:
    """A 1 to 4 value box shorthand (``margin``, ``inset``) as top, right, bottom, left."""
    top = values[0]
    right = values[1] if len(values) > 1 else top
    bottom = values[2] if len(values) > 2 else top
    return top, right, bottom, values[3] if len(values) > 3 else right
