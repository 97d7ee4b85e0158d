"""``POST /auth/ws-ticket``: a ticket for a browser's WebSocket.

A browser cannot put an ``Authorization`` header on a WebSocket upgrade, and a token
in its URL would be written to access logs. So the web client asks for a ticket with
its header, then connects with ``?ticket=``: single-use, valid for a few seconds, and
worth nothing to whoever reads it in a log afterwards (navi/server/auth.py).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from navi.server.auth import WsTickets
from navi.server.http import json_response, user_of


async def ws_ticket(request: Request) -> Response:
    """A single-use WebSocket ticket for the caller: ``{"ticket", "expires_in"}`` (seconds);
    connect with ``/ws/sessions/{id}?ticket=…`` (or ``…/replay?ticket=…``) before it
    expires."""
    user = user_of(request)
    tickets: WsTickets = request.app.state.ws_tickets
    response = json_response({"ticket": tickets.issue(user), "expires_in": tickets.ttl_s})
    response.headers["cache-control"] = "no-store"
    return response


ROUTES = [Route("/auth/ws-ticket", ws_ticket, methods=["POST"])]
