"""The settings page's routes, and the chat's model picker.

- ``GET /settings`` → the caller's settings: ``{"model", "think", "tool_policy",
  "backend": {"name", "model", "url"?}, "may_change_backend"}`` and, for an admin, the
  saved connection: ``"backend_type"`` ("", "ollama", "openai"), ``"backend_url"``,
  ``"api_key_hint"`` (the key masked, "sk-…abcd"; the key itself is never returned).
- ``PATCH /settings`` with any of ``{"model", "think", "tool_policy", "backend_type",
  "backend_url", "api_key"}`` → the same, after the change. A connection that does not
  list its models is refused (422, the exact reason) and nothing is saved; ``api_key``
  left out keeps the saved one.
- ``POST /settings/connection/verify`` with ``{"backend_type", "backend_url", "api_key"?}``
  (admins) → ``{"ok": true, "backend", "models": [names]}``, or 422 with the exact reason.
- ``PATCH /sessions/{id}/model`` with ``{"model"}`` → the chat's next runs use it
  (``session.model_chosen`` in its log; "" goes back to the profile's).

There is no user id in any path: a caller reads and writes their own settings only.
The connection makes the server connect somewhere, so only an admin may change, verify
(with open access, the local user is one) and see it; its URL and it must pass the outbound checks of
tools/outbound.py — loopback and the LAN are allowed (that is where LLM servers live),
cloud-metadata and link-local addresses and Navi's own port never.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

import httpcore
import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from events.settings_events import BackendType, SettingsUpdated, ThinkChoice, ToolChoice
from navi.llm.auto import backend_in_use
from navi.llm.connection import Connection, KeyFile, connection_settings, verify
from navi.llm.errors import LLMError
from navi.llm.settings import LLMSettingsError
from navi.server.auth import User
from navi.server.http import HTTPError, body_as, json_response, user_of
from navi.server.state import state_of
from navi.session import messages as m
from navi.user_settings import SERVER, SettingsService, UserSettings
from tools.outbound import OutboundPolicy, OutboundRefused, resolve

# Model names as servers spell them: "gemma4:e2b-it-q8_0", "org/model-7B.gguf", "a@b".
ModelName = Annotated[str, msgspec.Meta(max_length=200, pattern=r"^[A-Za-z0-9._:/@+-]*$")]
ToolName = Annotated[str, msgspec.Meta(max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")]
MAX_TOOL_RULES = 500
MAX_URL = 2048
MAX_KEY = 4096
ApiKey = Annotated[str, msgspec.Meta(max_length=MAX_KEY, pattern=r"^[\x21-\x7e]*$")]


class SettingsBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    model: ModelName | None = None
    think: ThinkChoice | None = None
    tool_policy: (
        Annotated[dict[ToolName, ToolChoice], msgspec.Meta(max_length=MAX_TOOL_RULES)] | None
    ) = None
    backend_url: Annotated[str, msgspec.Meta(max_length=MAX_URL)] | None = None
    backend_type: BackendType | None = None
    api_key: ApiKey | None = None

    def changes_connection(self) -> bool:
        return (self.backend_url, self.backend_type, self.api_key) != (None, None, None)


class VerifyBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    backend_type: BackendType = ""
    backend_url: Annotated[str, msgspec.Meta(max_length=MAX_URL)] = ""
    api_key: ApiKey | None = None  # left out: the saved one


class ModelBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    model: ModelName


def may_change_backend(user: User) -> bool:
    """The backend is the server's: its admins' (open access: the local user is one)."""
    return user.role == "admin"


def _service(request: Request) -> SettingsService:
    service = state_of(request).navi.user_settings
    if service is None:
        raise HTTPError(503, "settings are not available on this server")
    return service


async def _answer(request: Request, user: User, mine: UserSettings) -> Response:
    navi = state_of(request).navi
    admin = may_change_backend(user)
    backend = backend_in_use(navi.backend)
    about: dict[str, object] = {"name": backend.name, "model": backend.model}
    body: dict[str, object] = {
        "model": mine.model,
        "think": mine.think,
        "tool_policy": mine.tool_policy,
        "may_change_backend": admin,
        "backend": about,
    }
    if admin:  # where the server connects, for those who may change it
        about["url"] = _without_credentials(backend.url)
        server = await _service(request).get(SERVER)
        body["backend_url"] = server.backend_url
        body["backend_type"] = server.backend_type
        body["api_key_hint"] = server.api_key_hint
    return json_response(body)


async def get_settings(request: Request) -> Response:
    """The caller's settings (and the server's backend URL, for an admin)."""
    user = user_of(request)
    return await _answer(request, user, await _service(request).get(user.id))


async def patch_settings(request: Request) -> Response:
    """Change some of the caller's settings; the connection: admins only (403)."""
    user = user_of(request)
    body = await body_as(request, SettingsBody)
    service = _service(request)
    if body.changes_connection():
        connection = await _connection(request, user, body)
        try:
            await state_of(request).navi.use_connection(connection)
        except LLMSettingsError as exc:
            raise HTTPError(422, str(exc)) from None
        except LLMError as exc:
            raise HTTPError(422, f"not saved: {exc.message}") from None
    mine = await service.get(user.id)
    change = SettingsUpdated(model=body.model, think=body.think, tool_policy=body.tool_policy)
    if change != SettingsUpdated():
        mine = await service.update(user.id, change)
    return await _answer(request, user, mine)


async def verify_connection(request: Request) -> Response:
    """Whether a connection can be used: the models it lists, or the exact reason."""
    user = user_of(request)
    body = await body_as(request, VerifyBody)
    wanted = SettingsBody(
        backend_type=body.backend_type, backend_url=body.backend_url, api_key=body.api_key
    )
    connection = await _connection(request, user, wanted)
    navi = state_of(request).navi
    try:
        backend, models = await verify(connection_settings(navi.settings.llm, connection))
    except LLMSettingsError as exc:
        raise HTTPError(422, str(exc)) from None
    except LLMError as exc:
        raise HTTPError(422, exc.message) from None
    await backend.aclose()
    names = [model.name for model in models]
    return json_response({"ok": True, "backend": backend.name, "models": names})


async def _connection(request: Request, user: User, body: SettingsBody) -> Connection:
    """The connection ``body`` asks for (what it leaves out: as saved), checked."""
    if not may_change_backend(user):
        raise HTTPError(403, "only an admin may change the LLM backend's connection")
    navi = state_of(request).navi
    saved = await _service(request).get(SERVER)
    kind = saved.backend_type if body.backend_type is None else body.backend_type
    url = saved.backend_url if body.backend_url is None else body.backend_url.strip()
    if url:
        await check_backend_url(url, navi_port=navi.settings.port)
    key = body.api_key
    if key is None:
        key = KeyFile(navi.settings.llm_key_path).read() if saved.api_key_hint else ""
    if kind != "openai" and not (kind == "" and navi.settings.llm.backend == "openai"):
        key = ""  # Ollama takes none
    return Connection(kind=kind, url=url, api_key=key)


async def choose_model(request: Request) -> Response:
    """The chat's model from its next LLM call on: ``{"model": "…"}`` ("": the profile's)."""
    server = state_of(request)
    session_id = request.path_params["session_id"]
    await server.sessions.get(session_id, user_of(request))
    body = await body_as(request, ModelBody)
    model = await server.navi.sessions.ask(session_id, m.ChooseModel(model=body.model))
    return json_response({"session_id": session_id, "model": model})


async def check_backend_url(url: str, *, navi_port: int) -> None:
    """422 unless ``url`` is an http(s) URL without credentials whose host resolves only
    to addresses an LLM server may have."""
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise HTTPError(422, "the backend URL is not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HTTPError(422, "the backend URL must be http:// or https:// with a host")
    if parts.username or parts.password:
        raise HTTPError(422, "the backend URL may not hold credentials (OPENAI_API_KEY does)")
    policy = OutboundPolicy(allow_private=True, allow_loopback=True, navi_port=navi_port)
    try:
        policy.check_name(parts.hostname)
        addresses = await resolve(parts.hostname, port)
    except OutboundRefused as exc:
        raise HTTPError(422, str(exc)) from None
    except httpcore.ConnectError as exc:
        raise HTTPError(422, f"the backend URL's host: {exc}") from None
    for address in addresses:
        refusal = policy.refusal(address, port)
        if refusal is not None:
            raise HTTPError(422, f"the backend URL reaches {address}: {refusal}")


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    if not (parts.username or parts.password):
        return url
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]).geturl()


ROUTES = [
    Route("/settings", get_settings, methods=["GET"]),
    Route("/settings", patch_settings, methods=["PATCH"]),
    Route("/settings/connection/verify", verify_connection, methods=["POST"]),
    Route("/sessions/{session_id}/model", choose_model, methods=["PATCH"]),
]
