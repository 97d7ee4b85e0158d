"""How Navi reaches one MCP server: the SDK transport for its entry.

- ``"type": "sse"``: the legacy transport (2024-11-05), a GET event stream and POSTed
  messages;
- ``url``: Streamable HTTP, through an HTTP client whose answers ``on_response`` sees
  (the SDK reports a 401 only as "an error response": the connection says what it is);
  both remote kinds sign in with ``auth`` when given (navi/mcp/oauth.py);
- ``command``: a stdio child whose environment is its entry's ``env``, ``LANG`` and
  Navi's proxy and CA variables (navi/mcp/environment.py; the entry's own win), run in
  the tool sandbox with ``"sandbox": true`` (navi/mcp/sandbox.py). Its stderr goes to
  ``errlog``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import IO, Any, TextIO, cast

import anyio

from navi.mcp.config import ServerEntry
from navi.mcp.environment import passed_through
from navi.mcp.sandbox import SandboxPlaces, SandboxRefused, sandboxed_launch


async def open_transport(
    entry: ServerEntry,
    stack: AsyncExitStack,
    errlog: IO[bytes],
    *,
    places: SandboxPlaces | None,
    on_response: Callable[[Any], Awaitable[None]],
    auth: Any = None,
) -> Any:
    """The transport the SDK's ``Client`` enters; what it opens closes with ``stack``."""
    from mcp.client.sse import sse_client
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if entry.transport == "sse":
        return sse_client(entry.url, headers=dict(entry.headers), timeout=30.0, auth=auth)
    if entry.url:
        import httpx2

        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=dict(entry.headers),
                timeout=httpx2.Timeout(30.0, read=300.0),
                # The SDK's OAuthClientProvider when it signs in (navi/mcp/oauth.py).
                auth=auth,
                event_hooks={"response": [on_response]},
            )
        )
        return streamable_http_client(entry.url, http_client=http)
    env = {**passed_through(), "LANG": os.environ.get("LANG") or "C.UTF-8", **entry.env}
    command, args = entry.command, list(entry.args)
    cwd: str | None = None
    if entry.sandbox:
        if places is None:
            raise SandboxRefused("no data folder was given for the server's home")
        argv, home, network = await sandboxed_launch(entry, places)
        command, args, cwd = argv[0], argv[1:], str(home)
        if network is not None:
            stack.callback(network.close)
            # Its bwrap starts when the client enters the transport; the server's
            # command waits for the network, so initialize waits too.
            tg = await stack.enter_async_context(anyio.create_task_group())
            tg.start_soon(functools.partial(network.start, reopened=True))
    params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
    # The SDK only passes the file on to the child as its stderr (its fileno).
    return stdio_client(params, errlog=cast(TextIO, errlog))
