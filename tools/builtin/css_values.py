"""CSS values as a page-only reader can judge them: colours, lengths, and whether a
``transform``, ``clip``, ``clip-path`` or offset puts an element's text out of sight.

There is no layout engine here: a length relative to something we do not know (a
percentage of a width, a viewport unit) is judged by the usual assumptions (16 px to
the em, a 1280 x 800 viewport), and a value we cannot read is never taken as hiding.
"""

from __future__ import annotations

import colorsys
import math
import re

# r, g, b in 0..255 and alpha in 0..1.
RGBA = tuple[float, float, float, float]

WHITE: RGBA = (255.0, 255.0, 255.0, 1.0)
BLACK: RGBA = (0.0, 0.0, 0.0, 1.0)
TRANSPARENT: RGBA = (0.0, 0.0, 0.0, 0.0)

# How far off-screen an offset must put a box to count as hidden: further left or up
# than any layout puts text a reader sees, or far beyond the right or bottom edge.
FAR_BEFORE_PX = -500.0
FAR_AFTER_PX = 10_000.0
# Below this a scale factor, an opacity or a text colour's alpha leaves nothing readable.
INVISIBLE = 0.1
# A text colour this close to its background (on every channel, of 255) is not seen.
SAME_COLOUR = 10.0

_EM_PX = 16.0
_VIEWPORT = (1280.0, 800.0)
_UNIT_PX = {
    "px": 1.0,
    "em": _EM_PX,
    "rem": _EM_PX,
    "ex": _EM_PX / 2,
    "ch": _EM_PX / 2,
    "pt": 4 / 3,
    "pc": 16.0,
    "in": 96.0,
    "cm": 96 / 2.54,
    "mm": 96 / 25.4,
    "q": 96 / 101.6,
    "vw": _VIEWPORT[0] / 100,
    "vh": _VIEWPORT[1] / 100,
    "vmin": min(_VIEWPORT) / 100,
    "vmax": max(_VIEWPORT) / 100,
}
_DIMENSION = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)([a-z%]*)")
_FUNCTION = re.compile(r"([a-z][a-z0-9-]*)\(([^()]*)\)")
_HEX = re.compile(r"#([0-9a-f]{3,8})")

# The CSS named colours (CSS Color 4), as "name rrggbb" pairs.
_NAMED = """
aliceblue f0f8ff antiquewhite faebd7 aqua 00ffff aquamarine 7fffd4 azure f0ffff
beige f5f5dc bisque ffe4c4 black 000000 blanchedalmond ffebcd blue 0000ff
blueviolet 8a2be2 brown a52a2a burlywood deb887 cadetblue 5f9ea0 chartreuse 7fff00
chocolate d2691e coral ff7f50 cornflowerblue 6495ed cornsilk fff8dc crimson dc143c
cyan 00ffff darkblue 00008b darkcyan 008b8b darkgoldenrod b8860b darkgray a9a9a9
darkgreen 006400 darkgrey a9a9a9 darkkhaki bdb76b darkmagenta 8b008b
darkolivegreen 556b2f darkorange ff8c00 darkorchid 9932cc darkred 8b0000
darksalmon e9967a darkseagreen 8fbc8f darkslateblue 483d8b darkslategray 2f4f4f
darkslategrey 2f4f4f darkturquoise 00ced1 darkviolet 9400d3 deeppink ff1493
deepskyblue 00bfff dimgray 696969 dimgrey 696969 dodgerblue 1e90ff firebrick b22222
floralwhite fffaf0 forestgreen 228b22 fuchsia ff00ff gainsboro dcdcdc
ghostwhite f8f8ff gold ffd700 goldenrod daa520 gray 808080 green 008000
greenyellow adff2f grey 808080 honeydew f0fff0 hotpink ff69b4 indianred cd5c5c
indigo 4b0082 ivory fffff0 khaki f0e68c lavender e6e6fa lavenderblush fff0f5
lawngreen 7cfc00 lemonchiffon fffacd lightblue add8e6 lightcoral f08080
lightcyan e0ffff lightgoldenrodyellow fafad2 lightgray d3d3d3 lightgreen 90ee90
lightgrey d3d3d3 lightpink ffb6c1 lightsalmon ffa07a lightseagreen 20b2aa
lightskyblue 87cefa lightslategray 778899 lightslategrey 778899
lightsteelblue b0c4de lightyellow ffffe0 lime 00ff00 limegreen 32cd32 linen faf0e6
magenta ff00ff maroon 800000 mediumaquamarine 66cdaa mediumblue 0000cd
mediumorchid ba55d3 mediumpurple 9370db mediumseagreen 3cb371
mediumslateblue 7b68ee mediumspringgreen 00fa9a mediumturquoise 48d1cc
mediumvioletred c71585 midnightblue 191970 mintcream f5fffa mistyrose ffe4e1
moccasin ffe4b5 navajowhite ffdead navy 000080 oldlace fdf5e6 olive 808000
olivedrab 6b8e23 orange ffa500 orangered ff4500 orchid da70d6 palegoldenrod eee8aa
palegreen 98fb98 paleturquoise afeeee palevioletred db7093 papayawhip ffefd5
peachpuff ffdab9 peru cd853f pink ffc0cb plum dda0dd powderblue b0e0e6
purple 800080 rebeccapurple 663399 red ff0000 rosybrown bc8f8f royalblue 4169e1
saddlebrown 8b4513 salmon fa8072 sandybrown f4a460 seagreen 2e8b57 seashell fff5ee
sienna a0522d silver c0c0c0 skyblue 87ceeb slateblue 6a5acd slategray 708090
slategrey 708090 snow fffafa springgreen 00ff7f steelblue 4682b4 tan d2b48c
teal 008080 thistle d8bfd8 tomato ff6347 turquoise 40e0d0 violet ee82ee
wheat f5deb3 white ffffff whitesmoke f5f5f5 yellow ffff00 yellowgreen 9acd32
"""
NAMED_COLOURS: dict[str, RGBA] = {
    name: (float(int(hex_[0:2], 16)), float(int(hex_[2:4], 16)), float(int(hex_[4:6], 16)), 1.0)
    for name, hex_ in zip(_NAMED.split()[::2], _NAMED.split()[1::2], strict=True)
}


# ---------------------------------------------------------------- numbers and lengths


def number(text: str) -> float | None:
    """A plain number, or a percentage as a fraction (``50%`` → 0.5)."""
    found = _DIMENSION.fullmatch(text.strip().lower())
    if found is None or found.group(2) not in ("", "%"):
        return None
    value = float(found.group(1))
    return value / 100 if found.group(2) == "%" else value


def length_px(text: str) -> float | None:
    """A length in px (``0`` without a unit too); None for a percentage, ``auto``, a
    ``calc()`` or anything else whose size we cannot know."""
    found = _DIMENSION.fullmatch(text.strip().lower())
    if found is None:
        return None
    value, unit = float(found.group(1)), found.group(2)
    if not unit:
        return value if value == 0 else None
    factor = _UNIT_PX.get(unit)
    return value * factor if factor is not None else None


def percent(text: str) -> float | None:
    found = _DIMENSION.fullmatch(text.strip().lower())
    if found is None or found.group(2) != "%":
        return None
    return float(found.group(1))


def is_far(text: str) -> bool:
    """An offset (``left``, ``margin-left``, ``text-indent``, a translation) that moves
    a box out of sight: far before the page's start, or far beyond its end."""
    px = length_px(text)
    if px is not None:
        return px <= FAR_BEFORE_PX or px >= FAR_AFTER_PX
    share = percent(text)
    return share is not None and share <= -100


def is_tiny(text: str) -> bool:
    """A size (``width``, ``font-size``) of at most one pixel."""
    px = length_px(text)
    if px is not None:
        return px <= 1.0
    share = percent(text)
    return share is not None and share <= 0


def functions(value: str) -> list[tuple[str, list[str]]]:
    """The functions of a value and their arguments: ``scale(0) translate(1px, 2px)``
    → ``[("scale", ["0"]), ("translate", ["1px", "2px"])]``."""
    return [
        (name, [a for a in re.split(r"[\s,/]+", args.strip()) if a])
        for name, args in _FUNCTION.findall(value.lower())
    ]


# ---------------------------------------------------------------- what hides


def transform_hides(value: str) -> bool:
    """A ``transform`` that shrinks the box to nothing (a scale near 0, a flat matrix)
    or moves it far out of sight."""
    for name, args in functions(value):
        if name in ("scale", "scalex", "scaley", "scale3d") and args:
            factors = [number(a) for a in (args[:2] if name == "scale3d" else args)]
            if any(f is not None and abs(f) < INVISIBLE for f in factors):
                return True
        elif name in ("translate", "translatex", "translatey", "translate3d"):
            if any(is_far(a) for a in args[:2]):
                return True
        elif name == "matrix" and len(args) == 6 and _matrix_hides(args):
            return True
    return False


def _matrix_hides(args: list[str]) -> bool:
    """``matrix(a, b, c, d, tx, ty)``: flat (its determinant near 0) or moved far."""
    values = [number(x) for x in args]
    a, b, c, d, tx, ty = (math.nan if v is None else v for v in values)
    if abs(a * d - b * c) < INVISIBLE**2:  # False when a value is unknown (nan)
        return True
    return any(not math.isnan(t) and is_far(f"{t}px") for t in (tx, ty))


def scale_hides(value: str) -> bool:
    """The ``scale`` property: ``0``, ``0 1``, ``5%``…"""
    factors = [number(part) for part in value.split()]
    return any(f is not None and abs(f) < INVISIBLE for f in factors)


def translate_hides(value: str) -> bool:
    """The ``translate`` property: ``-9999px``, ``0 -100vh``…"""
    return any(is_far(part) for part in value.split()[:2])


def clip_hides(value: str) -> bool:
    """``clip: rect(top, right, bottom, left)`` with nothing inside it."""
    for name, args in functions(value):
        if name == "rect" and len(args) == 4:
            top, right, bottom, left = (length_px(a) for a in args)
            if top is not None and bottom is not None and bottom <= top:
                return True
            if left is not None and right is not None and right <= left:
                return True
    return False


def clip_path_hides(value: str) -> bool:
    """A ``clip-path`` that leaves nothing: ``inset()`` of 50% a side or more,
    ``circle(0)``, an ``ellipse()`` with a zero radius, a ``polygon()`` of no area."""
    for name, args in functions(value):
        if name == "inset" and args:
            sides = args[: args.index("round")] if "round" in args else args
            if _inset_hides(sides):
                return True
        elif name in ("circle", "ellipse"):
            radii = args[: args.index("at")] if "at" in args else args
            if radii and any(length_px(r) == 0 or percent(r) == 0 for r in radii):
                return True
        elif name == "polygon" and _polygon_is_flat(args):
            return True
    return False


def _inset_hides(sides: list[str]) -> bool:
    # 1 to 4 values, as for margins: top, right, bottom, left. A side of 50% or more
    # and its opposite meet; a side of 1000 px or more cuts away any line of text.
    top, right, bottom, left = four_sides(sides)
    for one, other in ((top, bottom), (right, left)):
        shares = [percent(v) for v in (one, other)]
        if sum(s for s in shares if s is not None) >= 100:
            return True
        if any((length_px(v) or 0) >= 1000 for v in (one, other)):
            return True
    return False


def four_sides(values: list[str]) -> tuple[str, str, str, str]:
    """A 1 to 4 value box shorthand (``margin``, ``inset``) as top, right, bottom, left."""
    if len(values) == 1:
        return values[0], values[0], values[0], values[0]
    if len(values) == 2:
        return values[0], values[1], values[0], values[1]
    if len(values) == 3:
        return values[0], values[1], values[2], values[1]
    return values[0], values[1], values[2], values[3]


def _polygon_is_flat(args: list[str]) -> bool:
    if args and args[0] in ("nonzero", "evenodd"):
        args = args[1:]
    # Only points all in % or all in lengths: mixed, their area depends on the box.
    kind = percent if args and args[0].endswith("%") else length_px
    coords = [kind(a) for a in args]
    if len(coords) < 2 or len(coords) % 2:
        return False
    known = [c for c in coords if c is not None]
    if len(known) != len(coords):
        return False
    xs, ys, n = known[::2], known[1::2], len(known) // 2
    area = sum(xs[i] * ys[(i + 1) % n] - xs[(i + 1) % n] * ys[i] for i in range(n))
    return math.isclose(area, 0.0, abs_tol=1e-9)


# ---------------------------------------------------------------- colours


def colour(value: str) -> RGBA | None:
    """A colour value (name, ``#hex``, ``rgb()``, ``hsl()``, ``transparent``); None when
    it is not one or is relative (``currentcolor``, ``var()``)."""
    text = value.strip().lower()
    if text in NAMED_COLOURS:
        return NAMED_COLOURS[text]
    if text == "transparent":
        return TRANSPARENT
    hexed = _HEX.fullmatch(text)
    if hexed is not None:
        return _hex(hexed.group(1))
    found = _FUNCTION.fullmatch(text)
    if found is None:
        return None
    name, args = found.group(1), [a for a in re.split(r"[\s,/]+", found.group(2)) if a]
    if name in ("rgb", "rgba") and len(args) in (3, 4):
        channels = [_channel(a) for a in args[:3]]
        alpha = _alpha(args[3]) if len(args) == 4 else 1.0
        if None in channels or alpha is None:
            return None
        return (channels[0], channels[1], channels[2], alpha)  # type: ignore[return-value]
    if name in ("hsl", "hsla") and len(args) in (3, 4):
        return _hsl(args)
    return None


def first_colour(value: str) -> RGBA | None:
    """The colour in a shorthand (``background: #fff url(x.png) no-repeat``), if any."""
    whole = colour(value)
    if whole is not None:
        return whole
    for token in re.findall(r"[a-z]+\([^()]*\)|#[0-9a-f]+|[a-z]+", value.lower()):
        found = colour(token)
        if found is not None:
            return found
    return None


def over(top: RGBA, below: RGBA) -> RGBA:
    """``top`` painted over the opaque ``below``."""
    alpha = top[3]
    r, g, b = (alpha * top[i] + (1 - alpha) * below[i] for i in range(3))
    return (r, g, b, 1.0)


def unseen_on(text: RGBA, background: RGBA) -> bool:
    """Text of colour ``text`` on the opaque ``background`` does not show."""
    seen = over(text, background)
    return max(abs(seen[i] - background[i]) for i in range(3)) <= SAME_COLOUR


def _hex(digits: str) -> RGBA | None:
    if len(digits) in (3, 4):
        digits = "".join(d * 2 for d in digits)
    if len(digits) not in (6, 8):
        return None
    values = [int(digits[i : i + 2], 16) for i in range(0, len(digits), 2)]
    alpha = values[3] / 255 if len(values) == 4 else 1.0
    return (float(values[0]), float(values[1]), float(values[2]), alpha)


def _channel(text: str) -> float | None:
    share = percent(text)
    if share is not None:
        return max(0.0, min(255.0, share * 2.55))
    value = number(text)
    return None if value is None else max(0.0, min(255.0, value))


def _alpha(text: str) -> float | None:
    value = number(text)
    return None if value is None else max(0.0, min(1.0, value))


def _hsl(args: list[str]) -> RGBA | None:
    hue = number(args[0].removesuffix("deg"))
    saturation, lightness = percent(args[1]), percent(args[2])
    alpha = _alpha(args[3]) if len(args) == 4 else 1.0
    if hue is None or saturation is None or lightness is None or alpha is None:
        return None
    r, g, b = colorsys.hls_to_rgb((hue % 360) / 360, lightness / 100, saturation / 100)
    return (r * 255, g * 255, b * 255, alpha)
