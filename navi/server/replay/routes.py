"""REST for replay and debugging (docs/replay.md): time travel, the LLM requests, forks,
export / import, verify, and the timeline the web client's Replay view draws.

Every endpoint checks the owner first (another user's session is a 404, as everywhere)
and maps the replay library's errors to JSON errors (``EXCEPTION_HANDLERS``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from events.types import ContextCompressed
from navi.ids import new_id
from navi.recompress import recompress_and_wait
from navi.replay.errors import (
    ExportFormatError,
    ReplayError,
    SeqOutOfRangeError,
    SessionExistsError,
    SessionNotFoundError,
)
from navi.replay.export import export_lines
from navi.replay.fork import fork
from navi.replay.history import session_head
from navi.replay.import_ import ParsedExport, import_parsed, parse_export
from navi.replay.inspect import llm_request, state_at
from navi.replay.verify import verify_session
from navi.server.http import HTTPError, body_as, json_error, json_response, user_of
from navi.server.replay.timeline import build_timeline
from navi.server.state import ServerState, state_of
from navi.session.errors import TooManyImports
from projections.sessions import cut_title


class ForkBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    at: int
    title: str | None = None


class RecompressBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    model: str | None = None


_encode = msgspec.json.Encoder().encode


async def _owned(request: Request) -> tuple[ServerState, str]:
    """The server and the session id of the path, if the session is the caller's."""
    server = state_of(request)
    session_id = request.path_params["session_id"]
    await server.sessions.get(session_id, user_of(request))
    return server, session_id


def _seq(raw: str | None, name: str) -> int | None:
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise HTTPError(400, f"{name} must be a whole number, not {raw!r}") from None
    if value < 0:
        raise HTTPError(400, f"{name} must be 0 or more, not {value}")
    return value


def _raw_json(body: bytes, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type="application/json")


async def session_state(request: Request) -> Response:
    """The session as it was right after event ``?at=<seq>`` (default: now): run state,
    messages, context, todo, scratchpad, profile, LLM requests."""
    server, session_id = await _owned(request)
    at = _seq(request.query_params.get("at"), "at")
    if at is None:
        at = await session_head(server.navi.store, session_id)
    return _raw_json(_encode(await state_at(server.navi.store, session_id, at)))


async def session_llm_request(request: Request) -> Response:
    """The exact request of the LLM call recorded at an ``llm.requested`` seq."""
    server, session_id = await _owned(request)
    seq = _seq(request.path_params["seq"], "seq")
    assert seq is not None
    try:
        view = await llm_request(server.navi.store, session_id, seq)
    except ValueError as exc:
        raise HTTPError(400, str(exc)) from None
    return _raw_json(_encode(view))


async def session_timeline(request: Request) -> Response:
    """The session's events on the replay clock, by lane (subagents nested), with spans."""
    server, session_id = await _owned(request)
    return _raw_json(_encode(await build_timeline(server.navi.store, session_id)))


async def fork_session(request: Request) -> Response:
    """Fork: ``{"at": <seq>, "title"?}`` → 201, a new session whose stream starts with a
    copy of this one's up to ``at`` (navi/replay/fork.py)."""
    server, session_id = await _owned(request)
    body = await body_as(request, ForkBody)
    summary = await server.sessions.get(session_id, user_of(request))
    title = body.title if body.title is not None else summary.title or cut_title(summary.preview)
    async with server.new_session(user_of(request)):
        result = await fork(
            server.navi.store,
            session_id,
            body.at,
            new_id(),
            title=title.strip()[:200],
            model=summary.model,  # the chat's model: Retry, Regenerate and Edit keep it
        )
    server.on_session_created()
    return _raw_json(_encode(result), 201)


async def export_session(request: Request) -> Response:
    """The whole log as JSON lines (a header, the history, then subagent streams)."""
    server, session_id = await _owned(request)
    lines = export_lines(server.navi.store, session_id)
    first = await anext(lines)  # errors (an unknown session) before the response starts
    filename = f"navi-session-{session_id}.jsonl"

    async def body() -> AsyncIterator[bytes]:
        yield first
        async for line in lines:
            yield line

    return StreamingResponse(
        body(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


async def import_export(request: Request) -> Response:
    """Import an export file (the request body, JSON lines) → 201; ``?as_new=true``
    imports it under a new id. Every line is checked before anything is written; the
    caller owns what is imported, whatever the file says (navi/replay/import_links.py),
    and the answer's ``warnings`` list the links that were dropped.

    A user may import ``NAVI_USER_IMPORTS_PER_HOUR`` files an hour (429 past it, with
    ``Retry-After``); the file's bytes count against their quota (413) and the session
    against ``NAVI_USER_MAX_SESSIONS`` (403). The file is read and checked in a worker
    thread: a big one does not hold up other requests."""
    server = state_of(request)
    user = user_of(request)
    as_new = request.query_params.get("as_new", "false").lower()
    if as_new not in ("true", "false", "1", "0"):
        raise HTTPError(400, f"as_new must be true or false, not {as_new!r}")
    limit = server.navi.settings.user_imports_per_hour
    wait_s = server.import_rate.take(user.id)
    if wait_s is not None:
        refused = TooManyImports(limit, wait_s)
        response = json_error(refused.status, refused.message)
        response.headers["retry-after"] = str(wait_s)
        return response
    raw = await request.body()
    # Its type and size are checked at the edge (BodyRule in navi/server/app.py:
    # application/x-ndjson or application/json, at most NAVI_MAX_IMPORT_MB).
    if not raw.strip():
        raise HTTPError(400, "the request body is empty: send an export file (JSON lines)")
    blobs = server.navi.blobs
    if blobs is not None:
        await anyio.to_thread.run_sync(blobs.check_room, user.id, len(raw))
    parsed = await anyio.to_thread.run_sync(_parse_body, raw)
    session_id = new_id() if as_new in ("true", "1") else None
    observer = server.sessions.importing()
    async with server.new_session(user):
        try:
            result = await import_parsed(
                server.navi.store,
                parsed,
                owner=user.id,
                new_session_id=session_id,
                observer=observer,
            )
        finally:
            observer.settle()
    if blobs is not None:
        await anyio.to_thread.run_sync(
            lambda: blobs.add_import(result.session_id, user_id=user.id, size=len(raw))
        )
    server.on_session_created()
    return _raw_json(_encode(result), 201)


def _parse_body(raw: bytes) -> ParsedExport:
    """The export file checked line by line (``ExportFormatError`` at the first problem):
    seconds for a big file, so run in a worker thread."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        raise HTTPError(400, "the export file is not valid UTF-8") from None
    return parse_export(raw.splitlines())


async def verify(request: Request) -> Response:
    """Fold the session's log from scratch and compare with its stored snapshots."""
    server, session_id = await _owned(request)
    report = await verify_session(server.navi.store, session_id)
    out = msgspec.to_builtins(report)
    out["ok"] = report.ok
    return json_response(out)


async def recompress_session(request: Request) -> Response:
    """Summarise the latest compressed range again (``{"model"?}``; with no summary yet,
    compress now), superseding the old summary; answers when it is recorded."""
    server, session_id = await _owned(request)
    body = await body_as(request, RecompressBody, empty_ok=True)
    record = await recompress_and_wait(server.navi, session_id, body.model)
    compressed = isinstance(record.event, ContextCompressed)
    return json_response(
        {
            "session_id": session_id,
            "status": "compressed" if compressed else "failed",
            "seq": record.seq,
            "event": msgspec.to_builtins(record.event),
        }
    )


ROUTES = [
    Route("/sessions/import", import_export, methods=["POST"]),
    Route("/sessions/{session_id}/state", session_state, methods=["GET"]),
    Route("/sessions/{session_id}/llm-requests/{seq}", session_llm_request, methods=["GET"]),
    Route("/sessions/{session_id}/timeline", session_timeline, methods=["GET"]),
    Route("/sessions/{session_id}/fork", fork_session, methods=["POST"]),
    Route("/sessions/{session_id}/export", export_session, methods=["GET"]),
    Route("/sessions/{session_id}/verify", verify, methods=["GET"]),
    Route("/sessions/{session_id}/recompress", recompress_session, methods=["POST"]),
]


def _status(exc: ReplayError) -> int:
    if isinstance(exc, SessionNotFoundError):
        return 404
    if isinstance(exc, SessionExistsError):
        return 409
    if isinstance(exc, ExportFormatError):
        return 422
    if isinstance(exc, SeqOutOfRangeError):
        return 400
    return 400  # e.g. a subagent's stream cannot be forked


async def _replay_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ReplayError)
    return json_error(_status(exc), str(exc))


EXCEPTION_HANDLERS = {ReplayError: _replay_error}
