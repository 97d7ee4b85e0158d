"""jsonschema's validation errors in words an LLM can act on.

Each message names the argument (``argument 'tags[1]'``, ``argument 'nested.x'``, or
``arguments`` for the whole object) and says what was expected and what came instead,
e.g. ``argument 'count': expected integer, got string``. A keyword without its own
wording falls back to jsonschema's message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable

from jsonschema.exceptions import ValidationError

_TYPE_NAMES = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    tuple: "array",
    dict: "object",
    type(None): "null",
}


def type_name(value: object) -> str:
    """The JSON name of ``value``'s type (``integer``, ``string``, ``null``, ...)."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def label(path: Iterable[str | int]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return f"argument '{text}'" if text else "arguments"


def short(value: object) -> str:
    """``value`` as JSON, cut short: a message never repeats a long argument whole."""
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def describe(error: ValidationError) -> list[str]:
    """The message(s) for one error (``required`` and ``additionalProperties`` errors
    may stand for several names: one message per name)."""
    where = label(error.absolute_path)
    wording = _WORDING.get(str(error.validator))
    if wording is None:
        return [f"{where}: {error.message}"]
    return wording(error, where)


# ---------------------------------------------------------------- one keyword each

Wording = Callable[[ValidationError, str], list[str]]


def _type(error: ValidationError, where: str) -> list[str]:
    return [f"{where}: expected {' or '.join(_types(error))}, got {type_name(error.instance)}"]


def _types(error: ValidationError) -> list[str]:
    expected = error.validator_value
    return list(expected) if isinstance(expected, list) else [str(expected)]


def _required(error: ValidationError, where: str) -> list[str]:
    # One error per missing name; its message is "'name' is a required property".
    missing = [n for n in error.validator_value if n not in error.instance]
    named = [n for n in missing if error.message.startswith(repr(n))] or missing[:1]
    return [f"{label([*error.absolute_path, n])}: is required" for n in named]


def _unknown(error: ValidationError, where: str) -> list[str]:
    schema = error.schema if isinstance(error.schema, dict) else {}
    known_names = list(schema.get("properties", {}))
    patterns = list(schema.get("patternProperties", {}))
    extra = [
        name
        for name in error.instance
        if name not in known_names and not any(re.search(p, name) for p in patterns)
    ]
    known = ", ".join(known_names) or "none"
    kind = "property" if error.absolute_path else "argument"
    return [
        f"{label([*error.absolute_path, name])}: unknown {kind} (known: {known})" for name in extra
    ]


def _enum(error: ValidationError, where: str) -> list[str]:
    options = ", ".join(short(option) for option in error.validator_value)
    return [f"{where}: {short(error.instance)} is not one of: {options}"]


def _const(error: ValidationError, where: str) -> list[str]:
    return [f"{where}: must be {short(error.validator_value)}, got {short(error.instance)}"]


def _bound(words: str, *, length: bool = False) -> Wording:
    def wording(error: ValidationError, where: str) -> list[str]:
        got = len(error.instance) if length else error.instance
        return [f"{where}: {words.format(error.validator_value)}, got {got}"]

    return wording


def _at_least(words: str) -> Wording:
    def wording(error: ValidationError, where: str) -> list[str]:
        return [f"{where}: {words.format(error.validator_value)}"]

    return wording


def _pattern(error: ValidationError, where: str) -> list[str]:
    return [
        f"{where}: must match the pattern {error.validator_value!r}, got {short(error.instance)}"
    ]


def _any_of(error: ValidationError, where: str) -> list[str]:
    """Which of the allowed forms the value was meant to be, and what is wrong with it.

    A form that refuses the value's type at this very place, or the constant of one of
    its fields (a tagged union's ``kind``), was plainly not meant. If one form is left,
    its own messages are the answer (an object with one bad field says which field);
    if none, what the forms allow; else each meant form's first problem.
    """
    forms: dict[int, list[ValidationError]] = {}
    for sub in error.context or ():
        forms.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
    if not forms:  # oneOf: more than one form matched
        return [f"{where}: matches more than one of the allowed forms (exactly one is wanted)"]
    here = list(error.absolute_path)
    meant = [subs for subs in forms.values() if not any(_rules_out(s, here) for s in subs)]
    if len(meant) == 1:
        return [text for sub in meant[0] for text in describe(sub)]
    if meant:
        first = [describe(subs[0])[0].removeprefix(f"{where}: ") for subs in meant]
        return [f"{where}: matches none of the allowed forms: " + "; or ".join(first)]
    ruling = [next(s for s in subs if _rules_out(s, here)) for subs in forms.values()]
    if all(s.validator == "type" for s in ruling):
        wanted = dict.fromkeys(t for s in ruling for t in _types(s))
        return [f"{where}: expected {' or '.join(wanted)}, got {type_name(error.instance)}"]
    paths = {tuple(s.absolute_path) for s in ruling}
    if len(paths) == 1 and all(s.validator in ("const", "enum") for s in ruling):
        values = [v for s in ruling for v in _allowed_values(s)]
        options = ", ".join(dict.fromkeys(short(v) for v in values))
        return [
            f"{label(ruling[0].absolute_path)}: {short(ruling[0].instance)} is not one of: {options}"
        ]
    first = [describe(s)[0].removeprefix(f"{where}: ") for s in ruling]
    return [f"{where}: matches none of the allowed forms: " + "; or ".join(first)]


def _rules_out(sub: ValidationError, here: list[str | int]) -> bool:
    path = list(sub.absolute_path)
    if sub.validator == "type":
        return path == here
    return sub.validator in ("const", "enum") and path[:-1] == here and len(path) == len(here) + 1


def _allowed_values(sub: ValidationError) -> list[object]:
    return [sub.validator_value] if sub.validator == "const" else list(sub.validator_value)


def _not(error: ValidationError, where: str) -> list[str]:
    return [f"{where}: must not match {short(error.validator_value)}"]


def _nothing_allowed(error: ValidationError, where: str) -> list[str]:
    # jsonschema gives a ``false`` schema's error no path: the value says which it is.
    return [f"{where}: the value {short(error.instance)} is not allowed here"]


_WORDING: dict[str, Wording] = {
    "type": _type,
    "required": _required,
    "additionalProperties": _unknown,
    "enum": _enum,
    "const": _const,
    "pattern": _pattern,
    "minimum": _bound("must be >= {}"),
    "maximum": _bound("must be <= {}"),
    "exclusiveMinimum": _bound("must be > {}"),
    "exclusiveMaximum": _bound("must be < {}"),
    "multipleOf": _bound("must be a multiple of {}"),
    "minLength": _at_least("must have at least {} character(s)"),
    "maxLength": _bound("must have at most {} characters", length=True),
    "minItems": _at_least("must have at least {} item(s)"),
    "maxItems": _bound("must have at most {} items", length=True),
    "minProperties": _at_least("must have at least {} properties"),
    "maxProperties": _bound("must have at most {} properties", length=True),
    "uniqueItems": lambda error, where: [f"{where}: items must be unique"],
    "anyOf": _any_of,
    "oneOf": _any_of,
    "not": _not,
    # A ``false`` schema (e.g. ``"items": false`` after ``prefixItems``).
    "None": _nothing_allowed,
}
