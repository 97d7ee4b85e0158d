"""What a ``/v1`` request asks of the run's LLM calls, checked: ``temperature``,
``max_tokens`` / ``max_completion_tokens``, ``stop`` and ``response_format``
(``json_object``, ``json_schema``) become the run's :class:`CallOptions` (recorded in
``run.started``, so a resumed run keeps them); a JSON answer is checked against its
schema when the run ends (``jsonschema``, already a dependency for the tools' own
arguments).

A backend that cannot shape a JSON answer is a 400 ``response_format_not_supported``
before anything runs: the embedded model while it drives tools
(``NAVI_EMBEDDED_TOOLS=true``: the tool-calling format has its own grammar), and no
LLM at all.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import SchemaError, ValidationError
from jsonschema.validators import validator_for

from events.types import CallOptions
from navi.server.openai.errors import OpenAIError, invalid
from navi.server.openai.wire import ChatRequest

MAX_STOP = 4  # as OpenAI
NOT_SUPPORTED = "response_format_not_supported"


def call_options(request: ChatRequest) -> CallOptions | None:
    """The request's options for the run (None: the profile's for everything)."""
    temperature = request.temperature
    if temperature is not None and not 0 <= temperature <= 2:
        raise invalid("'temperature' must be between 0 and 2", param="temperature")
    max_tokens = request.max_completion_tokens or request.max_tokens
    if max_tokens is not None and max_tokens < 1:
        raise invalid("'max_tokens' must be at least 1", param="max_tokens")
    stop = _stop(request.stop)
    response_format = _response_format(request.response_format)
    found = CallOptions(
        temperature=temperature, max_tokens=max_tokens, stop=stop, response_format=response_format
    )
    return None if found == CallOptions() else found


def _stop(value: str | list[str] | None) -> tuple[str, ...]:
    stop = [value] if isinstance(value, str) else list(value or ())
    if len(stop) > MAX_STOP or not all(stop):
        raise invalid(f"'stop' is up to {MAX_STOP} non-empty strings", param="stop")
    return tuple(stop)


def _response_format(value: dict[str, Any] | None) -> dict[str, Any] | None:
    kind = (value or {}).get("type", "text")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind != "json_schema":
        raise invalid(
            f"response_format type {kind!r} is not supported: use text, json_object or json_schema",
            code=NOT_SUPPORTED,
            param="response_format",
        )
    assert value is not None
    spec = value.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        raise invalid(
            "response_format json_schema needs json_schema.schema, a JSON schema object",
            param="response_format",
        )
    assert isinstance(spec, dict)
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise invalid(
            f"response_format's schema is not a valid JSON schema: {exc.message}",
            param="response_format",
        ) from None
    kept = {"schema": schema, "name": str(spec.get("name") or "answer")}
    if isinstance(spec.get("strict"), bool):
        kept["strict"] = spec["strict"]
    return {"type": "json_schema", "json_schema": kept}


def refuse_unshapeable(options: CallOptions | None, backend: str, embedded_tools: bool) -> None:
    """400 where the backend cannot shape a JSON answer (never a silent plain answer)."""
    if options is None or options.response_format is None:
        return
    if backend == "embedded" and embedded_tools:
        reason = (
            "the embedded model drives tools here (NAVI_EMBEDDED_TOOLS=true), and its "
            "tool-calling format cannot also be held to a JSON grammar"
        )
    elif backend not in ("ollama", "openai", "embedded"):
        reason = f"the LLM backend ({backend}) has no structured output"
    else:
        return
    raise invalid(
        f"response_format cannot be kept: {reason}; send the request without it",
        code=NOT_SUPPORTED,
        param="response_format",
    )


def answer_mismatch(answer: str, options: CallOptions | None) -> str | None:
    """Why the answer does not keep the request's ``response_format`` (None: it does)."""
    if options is None or options.response_format is None:
        return None
    try:
        data = json.loads(answer)
    except ValueError as exc:
        return f"the answer is not JSON ({exc})"
    spec = options.response_format.get("json_schema")
    if spec is None:
        return None if isinstance(data, dict) else "the answer is JSON but not an object"
    schema = spec["schema"]
    try:
        validator_for(schema)(schema).validate(data)
    except ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the answer"
        return f"the answer does not match the schema at {where}: {exc.message}"
    return None


def mismatch_error(reason: str, *, acted: bool) -> OpenAIError:
    """The run ended, but its answer does not keep the format: a 502 (a retry runs
    again) unless a tool acted during the run, then a 422 the SDKs do not retry."""
    return OpenAIError(
        422 if acted else 502,
        f"the run's answer does not keep response_format: {reason}",
        code="response_format_mismatch",
    )
