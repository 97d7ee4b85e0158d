"""An OAuth-protected MCP server for the tests, written with the SDK: ``MCPServer`` with
``AuthSettings`` and an authorization server (an ``OAuthAuthorizationServerProvider``)
that approves every authorization at once, as a user clicking "Allow" would.

    with oauth_mcp_server() as server:     # server.url: ".../mcp"; server.provider counts
        ...

It serves Streamable HTTP at ``/mcp`` and the authorization server's endpoints
(``/.well-known/...``, ``/register``, ``/authorize``, ``/token``) on the same 127.0.0.1
port, in a thread (tests/support/asgi_server.py).
"""

from __future__ import annotations

import secrets
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from tests.support.asgi_server import serve_asgi
from tests.support.helpers import free_port


@dataclass
class ApprovingProvider:
    """An authorization server that says yes; what it did is counted for the tests."""

    # Seconds an access token lasts (a short one makes the client refresh).
    token_lifetime_s: int = 3600
    clients: dict[str, OAuthClientInformationFull] = field(default_factory=dict)
    codes: dict[str, AuthorizationCode] = field(default_factory=dict)
    access: dict[str, AccessToken] = field(default_factory=dict)
    refresh: dict[str, RefreshToken] = field(default_factory=dict)
    authorizations: int = 0
    refreshes: int = 0
    redirect_uris: list[str] = field(default_factory=list)

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        self.authorizations += 1
        self.redirect_uris.append(str(params.redirect_uri))
        code = secrets.token_urlsafe(24)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or ["mcp"],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        return self._issue(authorization_code.client_id, authorization_code.scopes)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refreshes += 1
        del self.refresh[refresh_token.token]
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(self, client_id: str, scopes: list[str]) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        expires = int(time.time()) + self.token_lifetime_s
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=self.token_lifetime_s,
            refresh_token=refresh,
            scope=" ".join(scopes),
        )


@dataclass
class OAuthMcpServer:
    url: str
    provider: ApprovingProvider
    calls: list[str]


@contextmanager
def oauth_mcp_server(
    token_lifetime_s: int = 3600, transport: str = "http"
) -> Iterator[OAuthMcpServer]:
    """The server on a free 127.0.0.1 port (see the module's docstring); ``transport``
    ``"sse"``: the legacy SSE transport at ``/sse`` instead."""
    path = "/sse" if transport == "sse" else "/mcp"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    provider = ApprovingProvider(token_lifetime_s=token_lifetime_s)
    calls: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # validate_token_resource's future default
        auth = AuthSettings(
            issuer_url=base,  # type: ignore[arg-type]
            resource_server_url=f"{base}{path}",  # type: ignore[arg-type]
            validate_token_resource=False,
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=["mcp"], default_scopes=["mcp"]
            ),
            required_scopes=["mcp"],
        )
    server = MCPServer("oauth-test", log_level="WARNING", auth_server_provider=provider, auth=auth)

    @server.tool()
    def echo(text: str) -> str:
        """Say the text back."""
        calls.append(text)
        return f"echo: {text}"

    if transport == "sse":
        app = server.sse_app(host="127.0.0.1")
    else:
        app = server.streamable_http_app(host="127.0.0.1")
    with serve_asgi(app, port=port) as url:
        assert url == base
        yield OAuthMcpServer(url=f"{base}{path}", provider=provider, calls=calls)
