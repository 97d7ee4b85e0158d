"""JSON-schema validation of tool arguments, for the subset tool schemas use.

Supported: ``type`` (one or a list), ``properties``, ``required``, ``enum``, ``items``,
``additionalProperties: false``, ``minimum`` / ``maximum``, ``minLength`` / ``maxLength``,
``minItems`` / ``maxItems``. Other keywords are ignored. Messages name the argument and
say what was expected, so the LLM can fix its call.
"""

from __future__ import annotations

import json
from typing import Any

_TYPE_NAMES = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
}


def type_name(value: object) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _matches_type(value: object, expected: str) -> bool:
    if expected == "integer":
        # JSON has one number type: 3.0 is an integer; True is not.
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "string":
        return isinstance(value, str)
    if expected == "array":
        return isinstance(value, list | tuple)
    if expected == "object":
        return isinstance(value, dict)
    if expected == "null":
        return value is None
    return True  # unknown type names are not ours to refuse


def _label(path: str) -> str:
    return f"argument '{path}'" if path else "arguments"


def _short(value: object) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def validate(value: object, schema: dict[str, Any], path: str = "") -> list[str]:
    """Every problem with ``value`` against ``schema``; an empty list means valid."""
    errors: list[str] = []
    expected = schema.get("type")
    if expected is not None:
        allowed = expected if isinstance(expected, list) else [expected]
        if not any(_matches_type(value, t) for t in allowed):
            wanted = " or ".join(allowed)
            return [f"{_label(path)}: expected {wanted}, got {type_name(value)}"]

    if "enum" in schema and value not in schema["enum"]:
        options = ", ".join(_short(option) for option in schema["enum"])
        errors.append(f"{_label(path)}: {_short(value)} is not one of: {options}")

    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{_label(path)}: must have at least {schema['minLength']} character(s)")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(
                f"{_label(path)}: must have at most {schema['maxLength']} characters, "
                f"got {len(value)}"
            )

    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{_label(path)}: must be >= {schema['minimum']}, got {value}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{_label(path)}: must be <= {schema['maximum']}, got {value}")

    if isinstance(value, dict):
        errors.extend(_validate_object(value, schema, path))

    if isinstance(value, list | tuple):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{_label(path)}: must have at least {schema['minItems']} item(s)")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(
                f"{_label(path)}: must have at most {schema['maxItems']} items, got {len(value)}"
            )
        item_schema = schema.get("items")
        if isinstance(item_schema, dict):
            for index, item in enumerate(value):
                errors.extend(validate(item, item_schema, f"{path}[{index}]"))
    return errors


def _validate_object(value: dict[str, Any], schema: dict[str, Any], path: str) -> list[str]:
    errors: list[str] = []
    properties: dict[str, Any] = schema.get("properties", {})
    prefix = f"{path}." if path else ""
    for name in schema.get("required", []):
        if name not in value:
            errors.append(f"{_label(prefix + name)}: is required")
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            errors.extend(validate(item, properties[name], prefix + name))
        elif extra is False:
            known = ", ".join(properties) or "none"
            errors.append(f"{_label(prefix + name)}: unknown argument (known: {known})")
        elif isinstance(extra, dict):
            errors.extend(validate(item, extra, prefix + name))
    return errors


def check_schema(schema: object) -> list[str]:
    """Problems that make ``schema`` unusable as a tool's ``parameters``."""
    if not isinstance(schema, dict):
        return [f"parameters must be a JSON object (dict), got {type_name(schema)}"]
    problems: list[str] = []
    if schema.get("type") != "object":
        problems.append('parameters must have "type": "object"')
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        problems.append('"properties" must be an object')
        properties = {}
    for name, sub in properties.items():
        if not isinstance(sub, dict):
            problems.append(f"property '{name}' must be a schema object")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        problems.append('"required" must be a list of property names')
    else:
        problems.extend(
            f"required property '{name}' is not in properties"
            for name in required
            if name not in properties
        )
    try:
        json.dumps(schema)
    except (TypeError, ValueError) as exc:
        problems.append(f"parameters must be JSON-serialisable: {exc}")
    return problems
