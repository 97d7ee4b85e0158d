"""The MCP servers' prompts for a client's prompt menu (the composer's ``/``).

- ``GET /mcp/prompts``: the prompts of the running servers the caller may use, each
  with its server, description and arguments (navi/mcp/prompts.py bounds them);
- ``POST /mcp/prompts/{server}/{name}`` ``{"arguments": {...}}``: the prompt filled in,
  ``{"text": ...}``. Nothing is sent to a chat: the client puts the text in its message
  box, and the user sends it (or not).

A caller may use a server's prompts when they may use one of its tools (an account of
role ``user`` is granted MCP tools by name: navi/accounts.py); a server they may not
use is not there for them (404), as is one that is not running or has no such prompt.
Arguments are checked before the server hears of them (422); the server's refusal is a
502, its silence a 504, a prompt longer than Navi takes a 502: each with a sentence.
"""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from navi.accounts import User
from navi.mcp.prompts import BadArguments, PromptInfo, PromptTooLong, check_arguments, checked_text
from navi.server.http import HTTPError, body_as, json_response, user_of
from navi.server.state import state_of
from tools.base import ToolError

PROMPT_BODY_BYTES = 64 * 1024
PROMPT_TIMEOUT_S = 30.0


class PromptBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    arguments: dict[str, Any] = {}


def _offered(request: Request) -> dict[str, tuple[PromptInfo, ...]]:
    """The running servers' prompts, of the servers the caller may use."""
    manager = state_of(request).navi.mcp
    if manager is None:
        return {}
    user = user_of(request)
    return {
        server: prompts
        for server, prompts in manager.prompt_list().items()
        if prompts and _may_use(user, manager.registry.external_tools(f"mcp:{server}"))
    }


def _may_use(user: User, tools: Any) -> bool:
    return user.role == "admin" or any(user.may_use(tool.name) for tool in tools)


async def list_prompts(request: Request) -> Response:
    """The prompt menu: ``[{server, name, title, description, arguments: [{name,
    description, required}]}]``, by server then as the server listed them."""
    offered = _offered(request)
    return json_response([p for server in sorted(offered) for p in offered[server]])


async def render_prompt(request: Request) -> Response:
    """One prompt filled in with ``arguments``: ``{"text"}`` for the message box."""
    server = request.path_params["server"]
    name = request.path_params["name"]
    info = next((p for p in _offered(request).get(server, ()) if p.name == name), None)
    if info is None:
        raise HTTPError(404, f"no MCP server {server[:60]!r} with a prompt {name[:60]!r}")
    body = await body_as(request, PromptBody, empty_ok=True, max_bytes=PROMPT_BODY_BYTES)
    try:
        arguments = check_arguments(info, body.arguments)
    except BadArguments as exc:
        raise HTTPError(422, str(exc)) from None
    manager = state_of(request).navi.mcp
    assert manager is not None  # it offered the prompt
    try:
        with anyio.fail_after(PROMPT_TIMEOUT_S):
            text = checked_text(await manager.prompt_text(server, name, arguments))
    except KeyError:
        raise HTTPError(404, f"the MCP server {server[:60]!r} is not running") from None
    except TimeoutError:
        raise HTTPError(
            504, f"the MCP server {server!r} did not answer in {PROMPT_TIMEOUT_S:g} s"
        ) from None
    except (ToolError, PromptTooLong) as exc:
        raise HTTPError(502, str(exc)) from None
    if not text.strip():
        raise HTTPError(502, f"the MCP server {server!r} gave the prompt {name!r} without text")
    return json_response({"server": server, "name": name, "text": text})


ROUTES = [
    Route("/mcp/prompts", list_prompts, methods=["GET"]),
    Route("/mcp/prompts/{server}/{name}", render_prompt, methods=["POST"]),
]
