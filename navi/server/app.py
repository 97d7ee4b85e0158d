"""The Starlette application: REST, the WebSocket, the web client, and start-up."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import msgspec
import structlog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route, WebSocketRoute

from events.errors import EventStoreError, is_storage_full
from navi.app import Navi
from navi.config import Settings
from navi.memory import memory_routes
from navi.server import (
    approvals,
    bodies,
    llm_routes,
    mcp_auth_routes,
    prompt_routes,
    routes,
    settings_routes,
)
from navi.server.auth import AuthMiddleware, Users, WsTickets
from navi.server.auth_routes import ROUTES as AUTH_ROUTES
from navi.server.blobs import get_blob
from navi.server.bodies import BodyRule, guard_bodies
from navi.server.files import FileStore, upload_file
from navi.server.headers import SecurityHeadersMiddleware
from navi.server.http import HTTPError, json_error
from navi.server.openai import api as openai_api
from navi.server.openai import edge as openai_edge
from navi.server.openai import errors as openai_errors
from navi.server.openai.ledger_pg import open_ledger
from navi.server.origins import (
    AllowedHosts,
    HostCheckMiddleware,
    OriginCheckMiddleware,
    SiteOrigin,
)
from navi.server.rate import HourlyLimit
from navi.server.replay import routes as replay_routes
from navi.server.replay.ws import replay_socket
from navi.server.state import ServerState, state_of
from navi.server.views import SessionsView
from navi.server.ws import session_socket
from navi.session.errors import SessionError, StorageFull
from navi.session.input import MESSAGE_BODY_BYTES
from profiles import UnknownProfile

log = structlog.get_logger(__name__)

NaviFactory = Callable[[], AbstractAsyncContextManager[Navi]]


async def _session_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SessionError)
    return json_error(exc.status, exc.message)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPError)
    return json_error(exc.status, exc.message)


async def _unknown_profile(request: Request, exc: Exception) -> Response:
    return json_error(404, str(exc))


async def _not_found(request: Request, exc: Exception) -> Response:
    if isinstance(exc, HTTPException):
        return json_error(exc.status_code, exc.detail or "error")
    return json_error(500, "internal error")


async def _storage_error(request: Request, exc: Exception) -> Response:
    """A write refused for want of space answers 507, said clearly (and the connection
    stays up); any other error of these kinds goes on to ``_internal`` (500)."""
    if not is_storage_full(exc):
        raise exc
    log.error("http.storage_full", path=request.url.path, error=str(exc))
    return json_error(StorageFull.status, StorageFull().message)


async def _internal(request: Request, exc: Exception) -> Response:
    # The exception's text stays in the log: it may name paths, queries or internals.
    log.exception("http.internal_error", path=request.url.path, error=str(exc))
    return json_error(500, "internal error (the server's log has the details)")


def create_app(
    settings: Settings,
    *,
    env: Mapping[str, str] | None = None,
    navi_factory: NaviFactory | None = None,
    users: Users | None = None,
    on_started: Callable[[], object] | None = None,
) -> Starlette:
    """The ASGI app. ``navi_factory`` opens the ``Navi`` it serves (tests pass their own);
    ``on_started`` runs once it is open (``navi serve`` freezes the start-up objects)."""
    users = users or Users.configure(
        host=settings.host,
        api_token=settings.api_token,
        users_file=settings.users_file,
        watch=settings.users_file_watched,
    )
    # The run checks each tool call against the same users (navi/run/permissions.py).
    factory = navi_factory or (lambda: Navi.open(settings, env=env, users=users))
    app = Starlette(
        routes=[
            *routes.ROUTES,
            *approvals.ROUTES,
            *llm_routes.ROUTES,
            *settings_routes.ROUTES,
            *mcp_auth_routes.ROUTES,
            *prompt_routes.ROUTES,
            *AUTH_ROUTES,
            Route("/sessions/{session_id}/files", upload_file, methods=["POST"]),
            Route("/sessions/{session_id}/blobs/{sha256}", get_blob, methods=["GET"]),
            *memory_routes(lambda request: state_of(request).navi.memory),
            *replay_routes.ROUTES,
            *openai_api.ROUTES,
            *openai_edge.CATCH_ALL,
            WebSocketRoute("/ws/sessions/{session_id}", session_socket),
            WebSocketRoute("/ws/sessions/{session_id}/replay", replay_socket),
            Route("/openapi.json", openapi_schema, methods=["GET"], include_in_schema=False),
            *_web_client(),
        ],
        exception_handlers={
            SessionError: _session_error,
            HTTPError: _http_error,
            UnknownProfile: _unknown_profile,
            HTTPException: _not_found,
            sqlite3.OperationalError: _storage_error,
            EventStoreError: _storage_error,
            OSError: _storage_error,
            Exception: _internal,
            **replay_routes.EXCEPTION_HANDLERS,
            **bodies.EXCEPTION_HANDLERS,
        },
        lifespan=_lifespan(settings, factory, on_started),
    )
    _guard_bodies(app, settings)
    _add_middleware(app, settings, users)
    if settings.host in ("0.0.0.0", "::") and not settings.allowed_hosts:
        log.warning(
            "server.hosts_not_listed",
            message="Navi listens on every interface but answers only to localhost: list "
            "the names and addresses clients use in NAVI_ALLOWED_HOSTS",
        )
    return app


def _lifespan(
    settings: Settings, factory: NaviFactory, on_started: Callable[[], object] | None
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """The app's lifespan: Navi open, the server's state made, the files' cleaner run."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with (
            factory() as navi,
            open_ledger(navi.store) as ledger,
            anyio.create_task_group() as tg,
        ):
            app.state.openai_ledger = ledger  # /v1's retries (navi/server/openai/ledger.py)
            files = FileStore(
                settings.files_root,
                ttl_hours=settings.session_files_ttl_hours,
                blobs=navi.blobs,
            )
            server = ServerState(
                navi=navi,
                sessions=SessionsView(navi.store),
                files=files,
                import_rate=HourlyLimit(settings.user_imports_per_hour),
                session_created_hooks=[navi.memory_worker.trigger],
            )
            app.state.navi_server = server
            app.state.max_upload_bytes = settings.session_files_max_size_mb * 1024 * 1024
            tg.start_soon(files.clean_periodically, server.sessions)
            if on_started is not None:
                on_started()
            log.info(
                "navi.started",
                backend=navi.backend.name,
                model=navi.backend.model,
                database=settings.database_url.split("@")[-1],
            )
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    return lifespan


def _guard_bodies(app: Starlette, settings: Settings) -> None:
    """Every route's request body bounded; the few that take more say so."""
    app.state.max_body_bytes = settings.max_body_bytes
    guard_bodies(
        app.routes,
        default=BodyRule(max_bytes=settings.max_body_bytes),
        special={
            # Uploads bound their own size (SESSION_FILES_MAX_SIZE_MB), spooled to disk.
            upload_file: BodyRule(accepts=frozenset({bodies.MULTIPART}), max_bytes=None),
            # A message may carry its images (base64 in the JSON).
            routes.post_message: BodyRule(max_bytes=MESSAGE_BODY_BYTES),
            openai_api.chat_completions: BodyRule(max_bytes=openai_api.CHAT_BODY_BYTES),
            replay_routes.import_export: BodyRule(
                accepts=frozenset({bodies.NDJSON, bodies.JSON}),
                max_bytes=settings.max_import_mb * 1024 * 1024,
            ),
        },
    )


def _add_middleware(app: Starlette, settings: Settings, users: Users) -> None:
    """add_middleware puts each one outside the ones before it: the Host is checked
    first, then the security headers wrap everything, then the Origin, then the user."""
    tickets = WsTickets(users, secret=settings.ws_ticket_secret)
    app.state.ws_tickets = tickets
    cluster = settings.database_url.startswith("postgres")
    if cluster and not (settings.ws_ticket_secret or users.open_access):
        # Nodes behind a balancer: a ticket from one would be refused by the others.
        log.warning(
            "auth.ws_ticket_secret_unset",
            hint="set NAVI_WS_TICKET_SECRET to the same value on every node",
        )
    app.add_middleware(AuthMiddleware, users=users, tickets=tickets)
    app.add_middleware(
        OriginCheckMiddleware,
        allowed=[_origin(o) for o in settings.allowed_origins],
    )
    # /v1 for the pages of NAVI_ALLOWED_ORIGINS: a preflight carries no token.
    app.add_middleware(
        openai_edge.OpenAICORS, origins=[_origin(o) for o in settings.allowed_origins]
    )
    app.add_middleware(SecurityHeadersMiddleware)
    app.add_middleware(
        HostCheckMiddleware,
        hosts=AllowedHosts.configure(bound_host=settings.host, extra=settings.allowed_hosts),
    )
    # Outside all: /v1 answers its errors in OpenAI's shape, the edge's included.
    app.add_middleware(openai_errors.OpenAIErrorShape)


def _origin(text: str) -> SiteOrigin:
    origin = SiteOrigin.parse(text)
    assert origin is not None, text  # Settings refused anything else
    return origin


def _web_client() -> list[Any]:
    try:
        from navi.web import static_dir
    except ImportError:
        return []
    from starlette.responses import FileResponse
    from starlette.staticfiles import StaticFiles

    root = static_dir()
    if not (root / "index.html").exists():
        return []

    async def index(request: Request) -> Response:
        return FileResponse(root / "index.html")

    return [Route("/", index, include_in_schema=False), Mount("/", StaticFiles(directory=root))]


async def openapi_schema(request: Request) -> Response:
    from navi.server.openapi import schema_for

    return Response(
        msgspec.json.encode(schema_for(request.app.routes)), media_type="application/json"
    )
