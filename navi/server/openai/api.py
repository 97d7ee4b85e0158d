"""``/v1``: Navi as an OpenAI-compatible model, for any OpenAI client (docs/api.md, "/v1").

- ``GET /v1/models``: one model per profile, ``navi/<profile_id>``.
- ``POST /v1/chat/completions``: a full agent turn of that profile (planning, tools,
  subagents) on the server; the answer is the assistant message, streamed as
  ``chat.completion.chunk``s with ``stream``. Each request is a real session
  (``X-Navi-Session``), continued when a request extends one the caller already has
  (history.py).

Following the run, streamed or not, is runs.py's. A retry (the same
``Idempotency-Key``, or the same body soon after) follows the run the first request
started instead of starting another (ledger.py).

Every error of ``/v1`` is in OpenAI's shape (errors.py): the routes answer
their own, ``OpenAIErrorShape`` those of the edge.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec
import structlog
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from events.types import CallOptions
from navi.grants import entry_refusal
from navi.run.state import IllegalTransition
from navi.server.auth import User
from navi.server.bodies import BodyError
from navi.server.http import HTTPError, body_as, user_of
from navi.server.openai.errors import OpenAIError, invalid
from navi.server.openai.history import ConversationIndex, seed_session
from navi.server.openai.ledger import (
    KEY_TTL_S,
    MAX_KEY_CHARS,
    REPEAT_WINDOW_S,
    Entry,
    Ledger,
    RunLedger,
)
from navi.server.openai.options import call_options, refuse_unshapeable
from navi.server.openai.runs import RunStream, collect, no_retry, run_error
from navi.server.openai.wire import (
    ChatRequest,
    Turn,
    completion,
    conversation,
    model_id,
    profile_of_model,
    refuse_client_tools,
)
from navi.server.state import state_of
from navi.session import messages as m
from navi.session.errors import RunActive, SessionError
from navi.session.input import MESSAGE_BODY_BYTES
from profiles import Profile, UnknownProfile

if TYPE_CHECKING:
    from navi.app import Navi

log = structlog.get_logger(__name__)

# A request may carry a conversation with its images: as much as a message may weigh.
CHAT_BODY_BYTES = MESSAGE_BODY_BYTES
_STARTED = int(time.time())
_encode = msgspec.json.Encoder().encode

Endpoint = Callable[[Request], Awaitable[Response]]


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(_encode(data), status, headers=headers, media_type="application/json")


def _error(exc: OpenAIError, headers: dict[str, str] | None = None) -> Response:
    return _json(exc.body(), exc.status, headers)


def openai_errors(endpoint: Endpoint) -> Endpoint:
    """Answer the route's errors in OpenAI's shape, with the statuses OpenAI uses (a
    body of the wrong shape is a 400, as malformed JSON is)."""

    @functools.wraps(endpoint)
    async def wrapped(request: Request) -> Response:
        try:
            return await endpoint(request)
        except OpenAIError as exc:
            return _error(exc)
        except (HTTPError, BodyError, SessionError) as exc:
            status = 400 if exc.status == 422 else exc.status
            return _error(OpenAIError(status, exc.message))
        except UnknownProfile as exc:
            return _error(OpenAIError(404, str(exc), code="model_not_found", param="model"))

    return wrapped


def _index(request: Request) -> ConversationIndex:
    """One index per running server (kept on the app's state)."""
    server = state_of(request)
    index: ConversationIndex | None = getattr(request.app.state, "openai_conversations", None)
    if index is None or index.sessions is not server.sessions:
        index = ConversationIndex(server.sessions)
        request.app.state.openai_conversations = index
    return index


def usable_profiles(navi: Navi, user: User) -> list[Profile]:
    """The profiles the caller may chat with: those whose reach (LAN, the sandbox's
    network, tools run without asking) the account has the grants for, as for
    ``POST /sessions`` (navi/grants.py). Their runs offer and run only the tools the
    user may use (navi/run/permissions.py)."""
    return [p for p in navi.profiles.all() if entry_refusal(user, user.id, p) is None]


def _model_json(profile: Profile) -> dict[str, Any]:
    return {
        "id": model_id(profile.id),
        "object": "model",
        "created": _STARTED,
        "owned_by": "navi",
        "name": profile.name,
        "description": profile.description,
    }


def _profile(navi: Navi, user: User, model: str) -> Profile:
    profile_id = profile_of_model(model)
    if profile_id is not None and profile_id in navi.profiles:
        profile = navi.profiles.get(profile_id)
        refusal = entry_refusal(user, user.id, profile)
        if refusal is not None:
            raise OpenAIError(403, refusal, code="grant_required", param="model")
        return profile
    raise OpenAIError(
        404,
        f"The model {model!r} does not exist: the models are navi/<profile_id>, "
        "listed by GET /v1/models",
        code="model_not_found",
        param="model",
    )


@openai_errors
async def list_models(request: Request) -> Response:
    """The models: one per profile (``navi/<profile_id>``)."""
    user = user_of(request)
    profiles = usable_profiles(state_of(request).navi, user)
    return _json({"object": "list", "data": [_model_json(p) for p in profiles]})


@openai_errors
async def get_model(request: Request) -> Response:
    """One model."""
    navi = state_of(request).navi
    return _json(_model_json(_profile(navi, user_of(request), request.path_params["model"])))


@openai_errors
async def chat_completions(request: Request) -> Response:
    """A full agent turn of the model's profile; the answer as a chat completion."""
    server = state_of(request)
    navi = server.navi
    user = user_of(request)
    body = await body_as(request, ChatRequest, max_bytes=CHAT_BODY_BYTES)
    profile = _profile(navi, user, body.model)
    refuse_client_tools(body)
    options = call_options(body)
    backend = await navi.backend_for(profile)
    refuse_unshapeable(options, backend.name, navi.settings.embedded_tools)
    turns = conversation(body.messages)
    entry, replayed = await _start_or_follow(request, user, profile, turns, body, options)
    session_id, reply = entry.session_id, entry.reply
    model = model_id(profile.id)
    headers = {"x-navi-session": session_id}
    if replayed:
        headers["idempotent-replayed"] = "true"
    log.info("openai.turn", session_id=session_id, model=model, stream=body.stream)
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        approve_at = f"{str(request.base_url).rstrip('/')}/#{session_id}"
        return RunStream(
            navi, entry, model, include_usage, headers, options, _ledger(request), approve_at
        )
    ledger = _ledger(request)
    reader = await collect(navi, ledger, entry, request.receive)
    if reader is None:  # the client is gone
        return Response(status_code=499)
    await ledger.leave(entry)
    failed = run_error(reader, options)
    if failed is not None:
        if not reader.acted:
            await ledger.forget(entry)
        return _error(failed, {**headers, **no_retry(reader)})
    return _json(
        completion(
            id=f"chatcmpl-{reply.run_id}",
            created=int(time.time()),
            model=model,
            content=reader.answer,
            reasoning=reader.thinking,
            usage=reader.usage,
        ),
        headers=headers,
    )


def _ledger(request: Request) -> Ledger:
    """The server's ledger: PostgreSQL's, shared by the nodes (made with the app, see
    navi/server/app.py), else one in this node's memory."""
    ledger: Ledger | None = getattr(request.app.state, "openai_ledger", None)
    if ledger is None:
        ledger = request.app.state.openai_ledger = RunLedger()
    return ledger


async def _start_or_follow(
    request: Request,
    user: User,
    profile: Profile,
    turns: list[Turn],
    body: ChatRequest,
    options: CallOptions | None,
) -> tuple[Entry, bool]:
    """The run a recent equal request started (its ``Idempotency-Key``, else its body),
    else a new one; whether it was found."""
    key = request.headers.get("idempotency-key", "").strip()
    if len(key) > MAX_KEY_CHARS:
        raise invalid(f"Idempotency-Key is at most {MAX_KEY_CHARS} characters")
    fingerprint = hashlib.sha256(_encode(body)).hexdigest()
    name, keep_s = (f"key:{key}", KEY_TTL_S) if key else (f"body:{fingerprint}", REPEAT_WINDOW_S)
    return await _ledger(request).start_or_follow(
        user.id,
        name,
        fingerprint,
        keep_s,
        lambda: _start_turn(request, user, profile, turns, options),
    )


async def _start_turn(
    request: Request,
    user: User,
    profile: Profile,
    turns: list[Turn],
    options: CallOptions | None,
) -> tuple[str, m.RunStartedReply]:
    """Send the last turn to the session it continues, or to a new session holding the
    turns before it."""
    navi = state_of(request).navi
    last = turns[-1]
    images = tuple(base64.b64encode(image).decode("ascii") for image in last.images)
    found = await _index(request).find(user, turns)
    if found is not None:
        try:
            if found.profile_id != profile.id:
                await navi.sessions.ask(found.session_id, m.SwitchProfile(profile.id))
            reply = await navi.send(found.session_id, last.text, images, call_options=options)
            return found.session_id, reply
        except (RunActive, IllegalTransition):
            pass  # it became busy meanwhile: a new session with the same history
    async with state_of(request).new_session(user):
        session_id = await seed_session(
            navi.store, profile=profile, user_id=user.id, history=turns[:-1], blobs=navi.blobs
        )
    state_of(request).on_session_created()
    return session_id, await navi.send(session_id, last.text, images, call_options=options)


ROUTES = [
    Route("/v1/models", list_models, methods=["GET"], include_in_schema=False),
    Route("/v1/models/{model:path}", get_model, methods=["GET"], include_in_schema=False),
    Route("/v1/chat/completions", chat_completions, methods=["POST"], include_in_schema=False),
]
