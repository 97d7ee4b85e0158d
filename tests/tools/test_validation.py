from __future__ import annotations

from typing import Any

import pytest

from tools.validation import check_schema, validate, validator_for

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


# ---------------------------------------------------------------- the shapes MCP servers
# and pydantic-made tools send: each was "valid" to the old hand-written validator.

PYDANTIC_LIKE: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "Item": {
            "type": "object",
            "properties": {"n": {"type": "integer", "exclusiveMinimum": 0}},
            "required": ["n"],
        }
    },
    "properties": {
        "item": {"$ref": "#/$defs/Item"},
        "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        "config": {
            "anyOf": [
                {"type": "object", "properties": {"a": {"type": "integer"}}},
                {"type": "null"},
            ]
        },
        "slug": {"type": "string", "pattern": "^[a-z-]+$"},
        "score": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "grid": {
            "type": "array",
            "items": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        },
        "shape": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}},
                    "required": ["kind", "r"],
                },
                {
                    "type": "object",
                    "properties": {"kind": {"const": "square"}, "side": {"type": "number"}},
                    "required": ["kind", "side"],
                },
            ]
        },
        "options": {
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "additionalProperties": {"type": "string"},
        },
    },
    "additionalProperties": False,
}


def test_a_valid_call_in_every_shape() -> None:
    args = {
        "item": {"n": 1},
        "limit": None,
        "config": {"a": 1},
        "slug": "a-b",
        "score": 0.5,
        "grid": [[0, 1], []],
        "shape": {"kind": "square", "side": 2},
        "options": {"x": 1, "label": "y"},
    }
    assert validate(args, PYDANTIC_LIKE) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"item": {"n": 0}}, "argument 'item.n': must be > 0, got 0"),
        ({"item": {}}, "argument 'item.n': is required"),
        ({"limit": "ten"}, "argument 'limit': expected integer or null, got string"),
        ({"config": {"a": "x"}}, "argument 'config.a': expected integer, got string"),
        (
            {"slug": "Not A Slug"},
            "argument 'slug': must match the pattern '^[a-z-]+$', got \"Not A Slug\"",
        ),
        ({"score": 0}, "argument 'score': must be > 0, got 0"),
        ({"score": 1}, "argument 'score': must be < 1, got 1"),
        ({"grid": [[1], [2, -1]]}, "argument 'grid[1][1]': must be >= 0, got -1"),
        ({"grid": [[1], ["a"]]}, "argument 'grid[1][0]': expected integer, got string"),
        ({"shape": {"kind": "circle"}}, "argument 'shape.r': is required"),
        (
            {"shape": {"kind": "hexagon"}},
            'argument \'shape.kind\': "hexagon" is not one of: "circle", "square"',
        ),
        ({"shape": 3}, "argument 'shape': expected object, got integer"),
        ({"options": {"label": 1}}, "argument 'options.label': expected string, got integer"),
        ({"extra": 1}, "argument 'extra': unknown argument (known: item, limit, config"),
    ],
)
def test_refs_unions_patterns_and_exclusive_bounds_are_checked(
    args: dict[str, Any], message: str
) -> None:
    errors = validate(args, PYDANTIC_LIKE)
    assert any(message in error for error in errors), errors


def test_every_problem_is_reported_at_once() -> None:
    errors = validate({"item": {"n": 0}, "slug": "X", "score": 2, "bogus": 1}, PYDANTIC_LIKE)
    assert len(errors) == 4, errors


def test_unknown_nested_properties_name_the_known_ones() -> None:
    errors = validate(
        {"path": "a", "nested": {"x": 1, "y": 2}},
        {
            **SCHEMA,
            "properties": {
                **SCHEMA["properties"],
                "nested": {**SCHEMA["properties"]["nested"], "additionalProperties": False},
            },
        },
    )
    assert errors == ["argument 'nested.y': unknown property (known: x)"]


def test_a_long_value_is_not_repeated_whole() -> None:
    (error,) = validate({"path": "a", "mode": "z" * 500}, SCHEMA)
    assert len(error) < 200 and error.endswith('"a", "b"')


def test_the_draft_a_schema_names_is_honoured() -> None:
    # draft-07 (what TypeScript MCP servers send): "items" as a list is tuple validation.
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "pair": {"type": "array", "items": [{"type": "integer"}, {"type": "string"}]}
        },
    }
    assert check_schema(draft7) == []
    assert validate({"pair": [1, "a"]}, draft7) == []
    assert validate({"pair": ["a", "a"]}, draft7) == [
        "argument 'pair[0]': expected integer, got string"
    ]


def test_a_schema_is_compiled_once() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert validator_for(schema) is validator_for(schema)
    assert validator_for(dict(schema)) is not validator_for(schema)


def test_check_schema_reports_what_jsonschema_refuses() -> None:
    problems = check_schema({"type": "object", "properties": {"a": {"type": "strnig"}}})
    assert len(problems) == 1 and problems[0].startswith("parameters/properties/a/type:"), problems
    assert check_schema({"type": "object", "properties": {"a": {"minimum": "3"}}})


def test_refs_must_point_inside_the_schema_and_nothing_is_fetched() -> None:
    dangling = {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}
    assert check_schema(dangling) == [
        "$ref '#/$defs/Missing' points at nothing in the schema (nothing is fetched)"
    ]
    remote = {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/x.json"}}}
    assert check_schema(remote) == [
        "$ref 'http://127.0.0.1:9/x.json' points at nothing in the schema (nothing is fetched)"
    ]
    # Used anyway (a tool registered before the check): a clear failure, no request.
    assert validate({"a": 1}, remote) == [
        "the tool's parameters cannot be used: unresolvable $ref 'http://127.0.0.1:9/x.json'"
    ]


def test_a_foreign_schema_may_require_what_it_does_not_describe() -> None:
    schema = {"type": "object", "properties": {}, "required": ["a"]}
    assert check_schema(schema, strict=False) == []
    assert validate({}, schema) == ["argument 'a': is required"]


def test_a_bad_pattern_is_found_when_the_schema_is_checked_and_never_raises_later() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "["}}}
    assert check_schema(schema) == ["parameters/properties/a/pattern: '[' is not a 'regex'"]
    (error,) = validate({"a": "x"}, schema)
    assert error.startswith("the tool's parameters cannot be used: error: unterminated")


def test_a_schema_keyword_that_is_not_a_string_is_reported_not_raised() -> None:
    assert check_schema({"$schema": {"x": 1}, "type": "object"}) == [
        "parameters/$schema: {'x': 1} is not of type 'string'"
    ]
