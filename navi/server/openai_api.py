"""``/v1``: Navi as an OpenAI-compatible model, for any OpenAI client (docs/api.md, "/v1").

- ``GET /v1/models``: one model per profile, ``navi/<profile_id>``.
- ``POST /v1/chat/completions``: a full agent turn of that profile (planning, tools,
  subagents) on the server; the answer is the assistant message, streamed as
  ``chat.completion.chunk``s with ``stream``. Each request is a real session
  (``X-Navi-Session``), continued when a request extends one the caller already has
  (openai_history.py).

While a streamed run is silent (tools running), an SSE comment goes out every
``KEEPALIVE_S`` seconds so proxies keep the request open. A client that hangs up stops
the run, as the Stop button does (``stop.requested(reason="client_disconnected")``), for
a streamed request and a plain one alike.

Every error of ``/v1`` is in OpenAI's shape (openai_errors.py): the routes answer
their own, ``OpenAIErrorShape`` those of the edge.
"""

from __future__ import annotations

import base64
import functools
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import structlog
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from events.types import CallOptions
from navi.grants import entry_refusal
from navi.run.state import IllegalTransition
from navi.server.auth import User
from navi.server.bodies import BodyError
from navi.server.http import HTTPError, body_as, user_of
from navi.server.openai_errors import OpenAIError
from navi.server.openai_events import RunReader, merged
from navi.server.openai_history import ConversationIndex, seed_session
from navi.server.openai_options import (
    answer_mismatch,
    call_options,
    mismatch_error,
    refuse_unshapeable,
)
from navi.server.openai_wire import (
    SSE_DONE,
    SSE_KEEPALIVE,
    ChatRequest,
    Turn,
    chunk,
    completion,
    conversation,
    model_id,
    profile_of_model,
    refuse_client_tools,
    sse,
)
from navi.server.state import state_of
from navi.session import messages as m
from navi.session.errors import RunActive, SessionError
from navi.session.input import MESSAGE_BODY_BYTES
from profiles import Profile, UnknownProfile

if TYPE_CHECKING:
    from navi.app import Navi

log = structlog.get_logger(__name__)

KEEPALIVE_S = 10.0
STREAM_QUEUE = 256  # chunks waiting for a slow client; then the log is read more slowly
STOP_REASON = "client_disconnected"
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
    session_id, reply = await _start_turn(request, user, profile, turns, options)
    model = model_id(profile.id)
    headers = {"x-navi-session": session_id}
    log.info("openai.turn", session_id=session_id, model=model, stream=body.stream)
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        return RunStream(navi, session_id, reply, model, include_usage, headers, options)
    reader = await _collect(navi, session_id, reply, request.receive)
    failed = run_error(reader, options)
    if failed is not None:
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


def run_error(reader: RunReader, options: CallOptions | None) -> OpenAIError | None:
    """How a run that did not keep its word is answered: a 502 when a retry is safe
    (nothing acted), else a 422, which the OpenAI SDKs do not retry (docs/api.md)."""
    if reader.ending == "failed":
        status = 422 if reader.acted else 502
        return OpenAIError(status, f"the run failed: {reader.error}", code="run_failed")
    if reader.ending == "completed":
        reason = answer_mismatch(reader.answer, options)
        if reason is not None:
            return mismatch_error(reason, acted=reader.acted)
    return None


def no_retry(reader: RunReader) -> dict[str, str]:
    """``x-should-retry: false`` (read by the official SDKs) once a tool has acted."""
    return {"x-should-retry": "false"} if reader.acted else {}


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


async def _stop(navi: Navi, session_id: str) -> None:
    with anyio.move_on_after(10, shield=True):
        await navi.stop(session_id, STOP_REASON)
    log.info("openai.client_disconnected", session_id=session_id)


async def _collect(
    navi: Navi, session_id: str, reply: m.RunStartedReply, receive: Receive
) -> RunReader:
    """Follow the run to its end; stop it if the client hangs up meanwhile."""
    reader = RunReader(run_id=reply.run_id)

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        await _stop(navi, session_id)  # the run ends stopped, which ends the loop below

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        batches = navi.store.subscribe_batches(session_id, after_seq=reply.after_seq)
        async with aclosing(batches):
            async for batch in batches:
                for record in batch:
                    reader.feed(record)
                if reader.ending is not None:
                    break
        tg.cancel_scope.cancel()
    return reader


class RunStream(Response):
    """The streamed answer: SSE ``data:`` chunks as the run's events become durable,
    keep-alive comments while it is silent, then ``data: [DONE]``. A ``Response`` with
    no body of its own (as Starlette's ``StreamingResponse``): no ``Content-Length``."""

    media_type = "text/event-stream; charset=utf-8"

    def __init__(
        self,
        navi: Navi,
        session_id: str,
        reply: m.RunStartedReply,
        model: str,
        include_usage: bool,
        headers: dict[str, str],
        options: CallOptions | None = None,
    ) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers({**headers, "cache-control": "no-cache", "x-accel-buffering": "no"})
        self.navi = navi
        self.session_id = session_id
        self.reply = reply
        self.model = model
        self.include_usage = include_usage
        self.options = options
        self.reader = RunReader(run_id=reply.run_id)
        self.created = int(time.time())
        self.gone = False

    def _chunk(self, **fields: Any) -> bytes:
        return sse(
            chunk(
                id=f"chatcmpl-{self.reply.run_id}", created=self.created, model=self.model, **fields
            )
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        await send(start)
        out, frames = anyio.create_memory_object_stream[bytes](STREAM_QUEUE)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._follow, out)
            tg.start_soon(self._watch, receive, tg.cancel_scope)
            try:
                await self._send_frames(frames, send)
            except OSError:  # the client is gone (uvicorn's ClientDisconnected)
                self.gone = True
            tg.cancel_scope.cancel()
        if self.gone:
            if self.reader.ending is None:
                await _stop(self.navi, self.session_id)
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _send_frames(self, frames: Any, send: Send) -> None:
        async with frames:
            while True:
                data = SSE_KEEPALIVE
                with anyio.move_on_after(KEEPALIVE_S):
                    try:
                        data = await frames.receive()
                    except anyio.EndOfStream:
                        return
                await send({"type": "http.response.body", "body": data, "more_body": True})

    async def _watch(self, receive: Receive, scope: anyio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.gone = True
        scope.cancel()

    async def _follow(self, out: Any) -> None:
        reader = self.reader
        store = self.navi.store
        async with out:
            await out.send(self._chunk(delta={"role": "assistant", "content": ""}))
            batches = store.subscribe_batches(self.session_id, after_seq=self.reply.after_seq)
            async with aclosing(batches):
                async for batch in batches:
                    pieces = [piece for record in batch for piece in reader.feed(record)]
                    for kind, text in merged(pieces):
                        key = "content" if kind == "content" else "reasoning_content"
                        await out.send(self._chunk(delta={key: text}))
                    if reader.ending is not None:
                        break
            failed = run_error(reader, self.options)
            if failed is not None:
                await out.send(sse(failed.body()))
            else:
                await out.send(self._chunk(delta={}, finish_reason="stop"))
                if self.include_usage:
                    await out.send(self._chunk(usage=reader.usage))
            await out.send(SSE_DONE)


ROUTES = [
    Route("/v1/models", list_models, methods=["GET"], include_in_schema=False),
    Route("/v1/models/{model:path}", get_model, methods=["GET"], include_in_schema=False),
    Route("/v1/chat/completions", chat_completions, methods=["POST"], include_in_schema=False),
]
