from __future__ import annotations

from typing import Any

import pytest

from tools.validation import check_schema, validate

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["a", "b"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "nested": {
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
        },
        "maybe": {"type": ["string", "null"]},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def test_valid_arguments_give_no_errors() -> None:
    args = {
        "path": "a.txt",
        "count": 3,
        "ratio": 0.5,
        "flag": True,
        "mode": "a",
        "tags": ["x"],
        "nested": {"x": 1},
        "maybe": None,
    }
    assert validate(args, SCHEMA) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"path": 3}, "argument 'path': expected string, got integer"),
        ({}, "argument 'path': is required"),
        ({"path": ""}, "argument 'path': must have at least 1 character(s)"),
        ({"path": "a", "count": 0}, "argument 'count': must be >= 1, got 0"),
        ({"path": "a", "count": 11}, "argument 'count': must be <= 10, got 11"),
        ({"path": "a", "count": 2.5}, "argument 'count': expected integer, got number"),
        ({"path": "a", "count": True}, "argument 'count': expected integer, got boolean"),
        ({"path": "a", "ratio": "1"}, "argument 'ratio': expected number, got string"),
        ({"path": "a", "flag": "yes"}, "argument 'flag': expected boolean, got string"),
        ({"path": "a", "mode": "c"}, 'argument \'mode\': "c" is not one of: "a", "b"'),
        ({"path": "a", "tags": ["x", 1]}, "argument 'tags[1]': expected string, got integer"),
        ({"path": "a", "tags": ["x", "y", "z"]}, "argument 'tags': must have at most 2 items"),
        ({"path": "a", "nested": {}}, "argument 'nested.x': is required"),
        ({"path": "a", "maybe": 1}, "argument 'maybe': expected string or null, got integer"),
        ({"path": "a", "bogus": 1}, "argument 'bogus': unknown argument (known: path, count"),
    ],
)
def test_each_mismatch_has_a_precise_message(args: dict[str, Any], message: str) -> None:
    errors = validate(args, SCHEMA)
    assert any(message in error for error in errors), errors


def test_integral_float_counts_as_integer() -> None:
    assert validate({"path": "a", "count": 3.0}, SCHEMA) == []


def test_not_an_object_at_all() -> None:
    assert validate([1], SCHEMA) == ["arguments: expected object, got array"]


def test_check_schema_finds_unusable_parameters() -> None:
    assert check_schema({"type": "object", "properties": {}}) == []
    assert "parameters must be a JSON object (dict), got string" in check_schema("x")
    assert 'parameters must have "type": "object"' in check_schema({"type": "string"})
    problems = check_schema({"type": "object", "properties": {}, "required": ["a"]})
    assert problems == ["required property 'a' is not in properties"]
