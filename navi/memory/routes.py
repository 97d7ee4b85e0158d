"""The memory REST API (Starlette routes; the server mounts them).

- ``GET /memory/facts`` → the facts, each with its source link
  ``{session_id, from_seq, to_seq, seqs}``; ``?q=words`` searches instead (ranked).
- ``GET /memory/facts/{fact_id}`` → the fact, its ``history`` and ``why``: the text of
  the messages its value was learned from, read from the session's log.
- ``PATCH /memory/facts/{fact_id}`` with ``{"value": "..."}`` → the edited fact.
- ``DELETE /memory/facts/{fact_id}`` → forgets it.
- ``GET /memory/summary`` → the summary, and the message runs get.
- ``GET /memory/status`` → ``{fact_count, updated_at, cannot_extract, extract_after_s}``:
  what the web client polls to say "Memory updated" (``updated_at`` moved) and, once,
  that the model cannot pick out facts (its last extraction answer was unusable).

Errors are ``{"error": "..."}``: 400 (body not JSON), 422 (wrong fields), 404 (no such
fact, or forgotten). The user is ``request.scope["navi_user"].id`` when the server's
authentication put one there, else ``"local"``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from navi.memory.decisions import FactNotFound
from navi.memory.service import MemoryService
from projections.memory import Fact, FactSource, FactVersion
from projections.types import iso_time

ServiceGetter = Callable[[Request], MemoryService]
Endpoint = Callable[[Request], Awaitable[Response]]

_encoder = msgspec.json.Encoder()


class FactEdit(msgspec.Struct, forbid_unknown_fields=True):
    value: str


_edit_decoder = msgspec.json.Decoder(FactEdit)


def json_response(content: Any, status: int = 200) -> Response:
    return Response(_encoder.encode(content), status_code=status, media_type="application/json")


def error(message: str, status: int) -> Response:
    return json_response({"error": message}, status)


def user_id_of(request: Request) -> str:
    """The request's user id (the auth middleware put the user there). None is a 401,
    never a default user: a route that forgot its check must not run as anyone."""
    user = request.scope.get("navi_user")
    user_id = getattr(user, "id", None)
    if not user_id:
        raise HTTPException(401, "unauthorized: send a valid token")
    return str(user_id)


def source_json(source: FactSource | None) -> dict[str, Any] | None:
    if source is None:
        return None
    return {
        "session_id": source.session_id,
        "from_seq": source.from_seq,
        "to_seq": source.to_seq,
        "seqs": list(source.seqs),
    }


def fact_json(fact: Fact) -> dict[str, Any]:
    return {
        "id": fact.fact_id,
        "category": fact.category,
        "key": fact.key,
        "value": fact.value,
        "source": source_json(fact.source),
        "model": fact.model,
        "edited_by_user": fact.edited_by_user,
        "learned_at": iso_time(fact.learned_at),
        "updated_at": iso_time(fact.updated_at),
    }


def version_json(version: FactVersion) -> dict[str, Any]:
    return {
        "kind": version.kind,
        "value": version.value,
        "at": iso_time(version.timestamp),
        "model": version.model,
        "source": source_json(version.source),
    }


def memory_routes(service_getter: ServiceGetter) -> list[Route]:
    """The routes, with ``service_getter(request)`` giving the service (e.g. from
    ``request.app.state``)."""

    async def list_facts(request: Request) -> Response:
        service = service_getter(request)
        user = user_id_of(request)
        query = request.query_params.get("q")
        if query is not None:
            try:
                limit = int(request.query_params.get("limit", "20"))
            except ValueError:
                return error("limit must be an integer", 422)
            facts = await service.search(user, query, limit)
        else:
            facts = await service.facts(user)
        return json_response([fact_json(f) for f in facts])

    async def get_fact(request: Request) -> Response:
        service = service_getter(request)
        user = user_id_of(request)
        fact = await service.fact(user, request.path_params["fact_id"])
        body = fact_json(fact)
        body["history"] = [version_json(v) for v in fact.history]
        body["why"] = [msgspec.to_builtins(m) for m in await service.sources(user, fact)]
        return json_response(body)

    async def edit_fact(request: Request) -> Response:
        raw = await request.body()
        try:
            edit = _edit_decoder.decode(raw)
        except msgspec.ValidationError as exc:
            return error(f'expected {{"value": "<text>"}}: {exc}', 422)
        except msgspec.DecodeError:
            return error("the body is not valid JSON", 400)
        except UnicodeDecodeError:  # msgspec checks the strings' UTF-8 as it decodes them
            return error("the body is not valid UTF-8", 400)
        service = service_getter(request)
        try:
            fact = await service.edit(
                user_id_of(request), request.path_params["fact_id"], edit.value
            )
        except ValueError as exc:  # an empty or too long value
            return error(str(exc), 422)
        return json_response(fact_json(fact))

    async def forget_fact(request: Request) -> Response:
        service = service_getter(request)
        fact = await service.forget(user_id_of(request), request.path_params["fact_id"])
        return json_response({"id": fact.fact_id, "forgotten": True})

    async def get_summary(request: Request) -> Response:
        return json_response(await _summary(service_getter(request), user_id_of(request)))

    async def get_status(request: Request) -> Response:
        return json_response(await _status(service_getter(request), user_id_of(request)))

    return [
        Route("/memory/status", _guarded(get_status), methods=["GET"]),
        Route("/memory/facts", _guarded(list_facts), methods=["GET"]),
        Route("/memory/facts/{fact_id}", _guarded(get_fact), methods=["GET"]),
        Route("/memory/facts/{fact_id}", _guarded(edit_fact), methods=["PATCH"]),
        Route("/memory/facts/{fact_id}", _guarded(forget_fact), methods=["DELETE"]),
        Route("/memory/summary", _guarded(get_summary), methods=["GET"]),
    ]


async def _summary(service: MemoryService, user: str) -> dict[str, Any]:
    state = await service.state(user)
    # A summary written before the facts last changed is not shown (it may still
    # mention an edited or forgotten value); ``message`` is what runs get meanwhile.
    summary = state.summary if state.summary_is_current else None
    return {
        "summary": None if summary is None else summary.text,
        "model": None if summary is None else summary.model,
        "updated_at": None if summary is None else iso_time(summary.timestamp),
        "fact_count": len(state.active()),
        "message": await service.summary_message(user),
    }


async def _status(service: MemoryService, user: str) -> dict[str, Any]:
    state = await service.state(user)
    active = state.active()
    latest = max((fact.updated_at for fact in active), default=None)
    return {
        "fact_count": len(active),
        "updated_at": None if latest is None else iso_time(latest),
        # An unusable answer waits for its retry: the model cannot do the job.
        "cannot_extract": bool(state.failures),
        "extract_after_s": service.extract_after_s,
    }


def _guarded(endpoint: Endpoint) -> Endpoint:
    """A missing or forgotten fact is a 404 wherever it is found out."""

    async def guarded(request: Request) -> Response:
        try:
            return await endpoint(request)
        except FactNotFound as exc:
            return error(str(exc), 404)

    return guarded
