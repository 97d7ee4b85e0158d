"""JSON-schema validation of tool arguments, on the ``jsonschema`` library.

Every keyword of JSON Schema Draft 2020-12 is checked (``$ref``/``$defs``, ``anyOf``,
``oneOf``, ``pattern``, ``exclusiveMinimum``, ...), or of the draft a schema names in
``$schema`` (MCP servers written in TypeScript send draft-07). ``format`` is an
annotation, as the specification says, and is not enforced. Every problem is reported,
each in words that name the argument and say what was expected, so the LLM can fix its
call (:mod:`tools.schema_messages`).

A schema is compiled once (:func:`validator_for` caches it); a ``$ref`` can only point
inside the schema itself: nothing is ever fetched, whatever a tool's schema says.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for as _validator_class_for
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from tools.schema_messages import describe, type_name

__all__ = ["ArgumentsValidator", "ToolSchemaError", "check_schema", "type_name", "validate"]


class ToolSchemaError(ValueError):
    """A tool's ``parameters`` cannot be used; the message says every reason."""


# An empty registry retrieves nothing: without it jsonschema would fetch a remote $ref
# over HTTP, and a tool's schema (an MCP server's) must not make Navi send a request.
_NO_REMOTE_REFS: Registry[Any] = Registry()


class ArgumentsValidator:
    """One tool's compiled ``parameters``: :meth:`errors` lists what is wrong with a call."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._validator: Validator = _validator_class(schema)(schema, registry=_NO_REMOTE_REFS)

    def errors(self, arguments: object) -> list[str]:
        """Every problem with ``arguments``, each once, in the schema's order; [] if valid."""
        try:
            found = list(self._validator.iter_errors(arguments))
        except Unresolvable as exc:
            return [f"the tool's parameters cannot be used: unresolvable $ref {exc.ref!r}"]
        except Exception as exc:
            # A schema never checked (a bad regex in ``pattern``): the call fails, clearly.
            return [f"the tool's parameters cannot be used: {type(exc).__name__}: {exc}"]
        messages: list[str] = []
        for error in found:
            messages.extend(describe(error))
        return list(dict.fromkeys(messages))


def _validator_class(schema: dict[str, Any]) -> Any:
    """The class for the draft ``$schema`` names, Draft 2020-12 if none (or unknown)."""
    if not isinstance(schema.get("$schema", ""), str):
        return Draft202012Validator  # its meta-schema check says what is wrong
    return _validator_class_for(schema, default=Draft202012Validator)


# Compiled validators by schema object. The entry keeps the schema alive, so its id is
# not reused while the entry exists; a tool's ``parameters`` is not changed in place.
_CACHE_SIZE = 1024
_cache: OrderedDict[int, tuple[dict[str, Any], ArgumentsValidator]] = OrderedDict()


def validator_for(schema: dict[str, Any]) -> ArgumentsValidator:
    """The compiled validator of ``schema``, made on its first use."""
    key = id(schema)
    entry = _cache.get(key)
    if entry is not None and entry[0] is schema:
        _cache.move_to_end(key)
        return entry[1]
    compiled = ArgumentsValidator(schema)
    _cache[key] = (schema, compiled)
    if len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)
    return compiled


def validate(arguments: object, schema: dict[str, Any]) -> list[str]:
    """Every problem with ``arguments`` against ``schema``; an empty list means valid."""
    return validator_for(schema).errors(arguments)


# ---------------------------------------------------------------- schemas themselves


def check_schema(schema: object, *, strict: bool = True) -> list[str]:
    """Problems that make ``schema`` unusable as a tool's ``parameters``; [] if none.

    ``strict`` adds what is legal JSON Schema but a mistake in a tool written for Navi
    (a required name the properties do not describe); schemas from elsewhere (an MCP
    server's) are taken as their authors meant them."""
    if not isinstance(schema, dict):
        return [f"parameters must be a JSON object (dict), got {type_name(schema)}"]
    try:
        json.dumps(schema)
    except (TypeError, ValueError) as exc:
        return [f"parameters must be JSON-serialisable: {exc}"]
    problems: list[str] = []
    if schema.get("type") != "object":
        problems.append('parameters must have "type": "object"')
    cls = _validator_class(schema)
    # With the format checker, as jsonschema's own check_schema: a ``pattern`` that is
    # not a regular expression is found here, not at the first call.
    meta = cls(cls.META_SCHEMA, format_checker=cls.FORMAT_CHECKER)
    for error in sorted(meta.iter_errors(schema), key=lambda e: list(map(str, e.path))):
        where = "/".join(str(part) for part in error.path)
        problems.append(f"parameters/{where}: {error.message}" if where else error.message)
    if problems:
        return problems
    if strict:
        properties = schema.get("properties", {})
        problems.extend(
            f"required property '{name}' is not in properties"
            for name in schema.get("required", [])
            if name not in properties
        )
    problems.extend(_unresolvable_refs(schema))
    return problems


def ensure_valid_schema(name: str, schema: object, *, strict: bool = False) -> None:
    """Raise :class:`ToolSchemaError` naming the tool when its ``parameters`` are unusable."""
    problems = check_schema(schema, strict=strict)
    if problems:
        raise ToolSchemaError(f"tool '{name}': " + "; ".join(problems))


def _unresolvable_refs(schema: dict[str, Any]) -> list[str]:
    """Each ``$ref`` that points at nothing: found now, not at the tool's first call."""
    resource = Resource.from_contents(schema, default_specification=DRAFT202012)
    resolver = _NO_REMOTE_REFS.resolver_with_root(resource)
    problems = []
    for ref in dict.fromkeys(_refs(schema, root=True)):
        try:
            resolver.lookup(ref)
        except Unresolvable:
            problems.append(f"$ref {ref!r} points at nothing in the schema (nothing is fetched)")
    return problems


def _refs(node: object, *, root: bool = False) -> list[str]:
    if isinstance(node, dict):
        if "$id" in node and not root:
            return []  # a resource of its own: its refs are relative to its $id
        ref = node.get("$ref")
        found = [ref] if isinstance(ref, str) else []
        for key, value in node.items():
            # Values under these keys are data, not schemas.
            if key not in ("enum", "const", "default", "examples"):
                found.extend(_refs(value))
        return found
    if isinstance(node, list):
        return [ref for item in node for ref in _refs(item)]
    return []
