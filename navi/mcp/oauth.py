"""Signing in to a remote MCP server (OAuth 2.1: discovery, dynamic client registration,
PKCE), with the SDK's ``OAuthClientProvider`` as the HTTP client's auth.

A server entry with a ``url`` and no ``Authorization`` header of its own gets the
provider. When the server answers 401, the SDK finds its authorization server,
registers Navi there (once: the registration is kept, navi/mcp/oauth_storage.py) and
hands the authorization URL to :meth:`SignInFlow.redirect`: the connection's state
becomes ``needs-sign-in`` and the URL waits in :class:`SignIns` for the user (``GET
/mcp/<server>/sign-in`` redirects there; the web client's Settings link to it). The
authorization server sends the browser back to Navi's redirect URI, ``GET
/mcp/oauth/callback?code=&state=`` (navi/server/mcp_auth_routes.py): the ``state`` names
the waiting flow, whose :meth:`SignInFlow.callback` returns the code to the SDK, which
gets the tokens, keeps them and goes on connecting. Later connections (and a restart of
Navi) use the kept tokens, refreshed by the SDK when they expire.

The redirect URI is Navi's own address: ``http://127.0.0.1:<NAVI_PORT>/mcp/oauth/callback``
(the host Navi is bound to when that is not loopback nor every interface). The
authorization URL carries the flow's ``state``, which is what lets a callback in:
it is shown to admins only and never logged.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import anyio
import structlog

from navi.mcp.config import ServerEntry
from navi.mcp.oauth_storage import FOLDER, FileTokenStorage

if TYPE_CHECKING:
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import AuthorizationCodeResult

    from navi.config import Settings

log = structlog.get_logger(__name__)

CALLBACK_PATH = "/mcp/oauth/callback"
_LOOPBACK_OR_ANY = {"127.0.0.1", "localhost", "::1", "0.0.0.0", "::", ""}


@dataclass(frozen=True, kw_only=True)
class OAuthPlaces:
    """Where sign-ins are kept and where the authorization server sends the browser."""

    folder: Path
    # Navi's own address, "http://127.0.0.1:8000": the redirect URI and the sign-in links.
    base_url: str
    # False for navi doctor's probe (navi/mcp/oauth_storage.py).
    persist_registration: bool = True

    @property
    def redirect_uri(self) -> str:
        return self.base_url + CALLBACK_PATH

    def sign_in_link(self, server: str) -> str:
        return f"{self.base_url}/mcp/{server}/sign-in"


def base_url(host: str, port: int) -> str:
    """Navi's address as a browser on this machine reaches it."""
    if host.strip().lower() in _LOOPBACK_OR_ANY:
        host = "127.0.0.1"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def oauth_places(settings: Settings, *, persist_registration: bool = True) -> OAuthPlaces:
    data = Path(settings.data_dir) if settings.data_dir else settings.files_root.absolute().parent
    return OAuthPlaces(
        folder=data / FOLDER,
        base_url=base_url(settings.host, settings.port),
        persist_registration=persist_registration,
    )


def uses_oauth(entry: ServerEntry) -> bool:
    """A remote entry without a token of its own in its ``headers``."""
    return bool(entry.url) and not any(k.lower() == "authorization" for k in entry.headers)


@dataclass(eq=False)
class PendingSignIn:
    """One authorization waiting for the user's browser to come back."""

    server: str
    # The authorization server's page; it carries the state (never logged).
    url: str
    state: str
    done: anyio.Event = field(default_factory=anyio.Event)
    code: str = ""
    iss: str | None = None
    # What the authorization server said instead of a code ("access_denied").
    refused: str = ""


class SignIns:
    """The sign-ins waiting for their callback, one per server at most."""

    def __init__(self) -> None:
        self._pending: dict[str, PendingSignIn] = {}

    def pending(self, server: str) -> PendingSignIn | None:
        return self._pending.get(server)

    def servers(self) -> list[str]:
        return sorted(self._pending)

    def begin(self, server: str, url: str) -> PendingSignIn:
        states = parse_qs(urlsplit(url).query).get("state") or [""]
        flow = PendingSignIn(server=server, url=url, state=states[0])
        self._pending[server] = flow  # an older flow of the server is no longer let in
        return flow

    def drop(self, flow: PendingSignIn) -> None:
        if self._pending.get(flow.server) is flow:
            del self._pending[flow.server]

    def finish(self, state: str, *, code: str, iss: str | None, refused: str = "") -> str | None:
        """Hand ``code`` to the flow whose state is ``state``; its server, or None when no
        flow waits with that state (unknown, used, or of a server since removed). A flow
        is finished once: it leaves at once, so a replayed callback finds nothing."""
        if not state:
            return None
        for flow in list(self._pending.values()):
            if flow.state and secrets.compare_digest(flow.state, state):
                self.drop(flow)
                flow.code, flow.iss, flow.refused = code, iss, refused
                flow.done.set()
                return flow.server
        return None


class SignInFlow:
    """The SDK's redirect and callback handlers for one server's connection."""

    def __init__(
        self,
        server: str,
        sign_ins: SignIns,
        on_waiting: Callable[[bool], None],
    ) -> None:
        self.server = server
        self.sign_ins = sign_ins
        # Told True when a sign-in starts waiting for the user, False once it is back.
        self.on_waiting = on_waiting
        self._flow: PendingSignIn | None = None

    async def redirect(self, authorization_url: str) -> None:
        self._flow = self.sign_ins.begin(self.server, authorization_url)
        self.on_waiting(True)

    async def callback(self) -> AuthorizationCodeResult:
        from mcp.client.auth import AuthorizationCodeResult, OAuthFlowError

        flow = self._flow
        if flow is None:
            raise OAuthFlowError("no sign-in was started")
        try:
            await flow.done.wait()
        finally:
            self.sign_ins.drop(flow)
            self._flow = None
        self.on_waiting(False)
        if flow.refused or not flow.code:
            raise OAuthFlowError(f"the sign-in was refused: {flow.refused or 'no code came back'}")
        return AuthorizationCodeResult(code=flow.code, state=flow.state, iss=flow.iss)


@functools.cache
def _provider_class() -> type[OAuthClientProvider]:
    from mcp.client.auth import OAuthClientProvider

    class KeptExpiryProvider(OAuthClientProvider):
        """The SDK's provider, knowing when a kept token expires (it reads only the
        token): after a restart an expired access token is refreshed, not sent to be
        refused, which would ask the user to sign in again."""

        async def _initialize(self) -> None:
            await super()._initialize()
            storage = self.context.storage
            if isinstance(storage, FileTokenStorage) and self.context.current_tokens:
                self.context.token_expiry_time = await storage.expires_at()

    return KeptExpiryProvider


def oauth_provider(
    entry: ServerEntry, places: OAuthPlaces, flow: SignInFlow
) -> OAuthClientProvider:
    """The SDK's auth for ``entry``'s HTTP client, its sign-in kept in ``places``."""
    from mcp.shared.auth import OAuthClientMetadata
    from pydantic import AnyUrl

    storage = FileTokenStorage(
        places.folder,
        entry.name,
        entry.url,
        redirect_uri=places.redirect_uri,
        persist_registration=places.persist_registration,
    )
    metadata = OAuthClientMetadata(
        client_name="Navi",
        redirect_uris=[AnyUrl(places.redirect_uri)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    return _provider_class()(
        server_url=entry.url,
        client_metadata=metadata,
        storage=storage,
        redirect_handler=flow.redirect,
        callback_handler=flow.callback,
    )
