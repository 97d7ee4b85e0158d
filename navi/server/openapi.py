"""The OpenAPI document of the REST API, built from Starlette's routes and the
endpoints' docstrings (first line: summary), kept true by a schemathesis test."""

from __future__ import annotations

import re
from typing import Any

from starlette.routing import BaseRoute
from starlette.schemas import BaseSchemaGenerator

ERROR = {
    "description": "An error",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"error": {"type": "string"}},
                "required": ["error"],
            }
        }
    },
}
_PARAM = re.compile(r"{([^}:]+)(?::[^}]*)?}")

# Request bodies, by (method, path).
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/sessions"): {
        "type": "object",
        "properties": {"profile_id": {"type": "string"}, "title": {"type": "string"}},
    },
    ("post", "/mcp/prompts/{server}/{name}"): {
        "type": "object",
        "properties": {"arguments": {"type": "object", "additionalProperties": {"type": "string"}}},
    },
    ("patch", "/sessions/{session_id}/pin"): {
        "type": "object",
        "properties": {"pinned": {"type": "boolean"}},
    },
    ("patch", "/sessions/{session_id}"): {
        "type": "object",
        "properties": {"title": {"type": "string"}},
        "required": ["title"],
    },
    ("patch", "/sessions/{session_id}/profile"): {
        "type": "object",
        "properties": {"profile_id": {"type": "string"}},
        "required": ["profile_id"],
    },
    ("post", "/sessions/{session_id}/messages"): {
        "type": "object",
        "properties": {
            "content": {"type": "string"},
            "images": {"type": "array", "items": {"type": "string"}},
            "queue": {"type": "boolean"},
        },
        "required": ["content"],
    },
    ("post", "/sessions/{session_id}/fork"): {
        "type": "object",
        "properties": {"at": {"type": "integer", "minimum": 1}, "title": {"type": "string"}},
        "required": ["at"],
    },
    ("post", "/sessions/import"): {
        "type": "string",
        "description": "an export file of GET /sessions/{session_id}/export (JSON lines)",
    },
}
# Bodies that are not JSON objects.
CONTENT_TYPES: dict[tuple[str, str], str] = {("post", "/sessions/import"): "application/x-ndjson"}
# Query parameters, by (method, path).
QUERY: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("get", "/sessions/{session_id}/state"): [
        {"name": "at", "in": "query", "schema": {"type": "integer", "minimum": 0}}
    ],
    ("post", "/sessions/import"): [
        {"name": "as_new", "in": "query", "schema": {"type": "boolean"}}
    ],
}


class _Generator(BaseSchemaGenerator):
    def get_schema(self, routes: list[BaseRoute]) -> dict[str, Any]:
        paths: dict[str, dict[str, Any]] = {}
        for endpoint in self.get_endpoints(routes):
            path = endpoint.path
            method = endpoint.http_method
            doc = (endpoint.func.__doc__ or "").strip().splitlines()
            operation: dict[str, Any] = {
                "summary": doc[0] if doc else path,
                "operationId": f"{method}_{endpoint.func.__name__}",
                "responses": {"200": {"description": "OK"}, "201": {"description": "Created"},
                              "400": ERROR, "401": ERROR, "403": ERROR, "404": ERROR,
                              "409": ERROR, "413": ERROR, "415": ERROR, "422": ERROR},
            }  # fmt: skip
            params = [
                {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                for name in _PARAM.findall(path)
            ]
            if path.endswith("/events"):
                params.append(
                    {"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0}}
                )
            if path == "/sessions" and method == "get":
                params.append({"name": "q", "in": "query", "schema": {"type": "string"}})
            params += QUERY.get((method, path), [])
            if params:
                operation["parameters"] = params
            body = BODIES.get((method, path))
            if body is not None:
                operation["requestBody"] = {
                    "required": method != "patch",
                    "content": {
                        CONTENT_TYPES.get((method, path), "application/json"): {"schema": body}
                    },
                }
            paths.setdefault(path, {})[method] = operation
        return {
            "openapi": "3.0.3",
            "info": {
                "title": "Navi",
                "version": "1.0",
                "description": "A personal, local-first AI agent server. "
                'Errors are JSON objects {"error": "…"}.',
            },
            "paths": paths,
        }


def schema_for(routes: list[BaseRoute]) -> dict[str, Any]:
    return _Generator().get_schema(routes)
