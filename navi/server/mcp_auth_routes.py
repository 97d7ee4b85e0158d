"""Signing in to remote MCP servers (OAuth; navi/mcp/oauth.py does the flow).

- ``GET /mcp/sign-ins`` (admins) → ``{"servers": [{"name", "link", "url"}]}``: the
  servers waiting for a sign-in, Navi's link for each and the authorization server's page
  it leads to (what the web client's Settings show).
- ``GET /mcp/{server}/sign-in`` (admins) → 303 to the server's authorization page; 404
  when no sign-in of that server waits.
- ``GET /mcp/oauth/callback?code=&state=`` → where the authorization server sends the
  browser back (the redirect URI Navi registered: ``http://127.0.0.1:<port>/mcp/oauth/callback``).

The sign-in is Navi's, not a user's: the tokens serve every user's calls of the
server's tools, so only an admin starts one (with open access the local user is one).
The callback comes from a browser redirect, which carries no ``Authorization`` header:
it is public (navi/server/auth.py), and the ``state`` of a waiting flow is what lets it in
(unguessable, used once, of a server whose connection waits). Anything else, a
wrong, used or missing state, gets the same answer, which names no server.
"""

from __future__ import annotations

from html import escape

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from navi.mcp.manager import McpManager
from navi.mcp.oauth import CALLBACK_PATH
from navi.server.http import HTTPError, json_response, user_of
from navi.server.state import state_of

# Callback parameters longer than this are not a code nor a state.
MAX_PARAM = 4096
UNKNOWN = "This sign-in link is unknown, used or expired. Start the sign-in again from Navi."
_NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def _manager(request: Request) -> McpManager | None:
    return state_of(request).navi.mcp


def _admin_manager(request: Request) -> McpManager:
    if user_of(request).role != "admin":
        raise HTTPError(403, "forbidden: signing in to an MCP server is for admins")
    manager = _manager(request)
    if manager is None:
        raise HTTPError(404, "no MCP servers run on this server")
    return manager


async def list_sign_ins(request: Request) -> Response:
    """The MCP servers waiting for a sign-in."""
    manager = _admin_manager(request)
    servers = []
    for name in manager.sign_ins.servers():
        flow = manager.sign_ins.pending(name)
        if flow is not None:
            servers.append({"name": name, "link": f"/mcp/{name}/sign-in", "url": flow.url})
    response = json_response({"servers": servers})
    response.headers.update(_NO_STORE)
    return response


async def sign_in(request: Request) -> Response:
    """Go to an MCP server's sign-in page (a redirect)."""
    manager = _admin_manager(request)
    flow = manager.sign_ins.pending(request.path_params["server"])
    if flow is None:
        raise HTTPError(404, "no sign-in of this MCP server is waiting")
    return RedirectResponse(flow.url, status_code=303, headers=_NO_STORE)


def _page(status: int, title: str, text: str) -> HTMLResponse:
    body = (
        "<!doctype html><meta charset=utf-8><title>Navi</title>"
        f"<h1>{escape(title)}</h1><p>{escape(text)}</p>"
    )
    return HTMLResponse(body, status_code=status, headers=_NO_STORE)


async def oauth_callback(request: Request) -> Response:
    """Where an MCP server's authorization server sends the browser back."""
    query = request.query_params
    state, code = query.get("state", ""), query.get("code", "")
    refused = query.get("error", "")
    iss = query.get("iss") or None
    manager = _manager(request)
    too_long = any(len(v) > MAX_PARAM for v in (state, code, refused, iss or ""))
    if manager is None or too_long or not (code or refused):
        return _page(400, "Sign-in not accepted", UNKNOWN)
    server = manager.sign_ins.finish(state, code=code, iss=iss, refused=refused[:200])
    if server is None:
        return _page(400, "Sign-in not accepted", UNKNOWN)
    if refused:
        return _page(200, "Sign-in refused", f"The sign-in to {server} was refused: {refused}.")
    return _page(200, "Signed in", f"Navi is connecting to {server}. You can close this tab.")


ROUTES = [
    Route("/mcp/sign-ins", list_sign_ins, methods=["GET"]),
    Route("/mcp/{server}/sign-in", sign_in, methods=["GET"]),
    # A page for a browser that an authorization server redirects, not an API call.
    Route(CALLBACK_PATH, oauth_callback, methods=["GET"], include_in_schema=False),
]
