"""What ``navi doctor`` and the logs say about one MCP server."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import IO, Literal

State = Literal["starting", "running", "restarting", "failed", "stopped", "needs-sign-in"]
PROMPTS_NAMED = 20
# A remote server that answers 401 to a connection that cannot sign in (navi/mcp/oauth.py
# signs in when the manager has a data folder for the tokens).
SIGN_IN_NEEDED = (
    "it answered 401 Unauthorized: it wants a sign-in (OAuth), which this connection "
    'cannot do; give a token in the entry\'s "headers" ("Authorization": "Bearer ${TOKEN}") '
    "if the server accepts one"
)
# The entry's own token was refused (Navi signs in only for entries without one).
TOKEN_REFUSED = (
    'it answered 401 Unauthorized: the "Authorization" of the entry\'s "headers" was '
    "refused; remove that header to sign in with OAuth instead"
)
# The connection waits for the user to sign in (the link is ServerStatus.sign_in).
WAITING_FOR_SIGN_IN = "it wants a sign-in (OAuth)"
# How much of a stdio server's stderr a failure report quotes.
STDERR_TAIL = 600


@dataclass(frozen=True, kw_only=True)
class ServerStatus:
    """One server's state, and what it offers when it runs."""

    name: str
    transport: str
    state: State
    error: str = ""
    tools: int = 0
    restarts: int = 0
    sandboxed: bool = False
    # The server's tools its entry's "tools" filter left out.
    dropped: tuple[str, ...] = ()
    # Resources and resource templates it listed (read through mcp__<name>__read_resource).
    resources: int = 0
    # The names of its prompts.
    prompts: tuple[str, ...] = ()
    # With state "needs-sign-in": Navi's link that leads to the server's sign-in page.
    sign_in: str = ""

    def describe(self) -> str:
        where = self.transport + (", sandboxed" if self.sandboxed else "")
        if self.state == "running":
            left_out = (
                f' (left out by its "tools" filter: {", ".join(self.dropped)})'
                if self.dropped
                else ""
            )
            count = f"{self.tools} tool{'' if self.tools == 1 else 's'}"
            offers = ""
            if self.resources:
                offers += f", {self.resources} resource{'' if self.resources == 1 else 's'}"
            if self.prompts:
                named = ", ".join(self.prompts[:PROMPTS_NAMED])
                more = (
                    f" and {len(self.prompts) - PROMPTS_NAMED} more"
                    if len(self.prompts) > PROMPTS_NAMED
                    else ""
                )
                offers += f", prompts: {named}{more}"
            return f"MCP server {self.name} ({where}): running, {count}{left_out}{offers}"
        why = f": {self.error}" if self.error else ""
        if self.state == "needs-sign-in":
            at = f"; sign in at {self.sign_in}" if self.sign_in else ""
            return f"MCP server {self.name} ({where}): needs sign-in{why}{at}"
        return f"MCP server {self.name} ({where}): {self.state}{why}"


class StartFailed(Exception):
    """A server did not start, or stopped answering; the message says why."""


def describe_error(exc: BaseException) -> str:
    """One line for a failure, the first real one of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    name = type(exc).__name__
    if isinstance(exc, StartFailed):
        return text
    return f"{name}: {text}" if text and name not in text else (text or name)


def stderr_tail(errlog: IO[bytes]) -> str:
    """The last ``STDERR_TAIL`` characters of the child's stderr, on one line (bytes read
    from the end: a cut character, or text not in UTF-8, is replaced, not a failure)."""
    with contextlib.suppress(OSError, ValueError):
        size = errlog.seek(0, os.SEEK_END)
        errlog.seek(max(0, size - STDERR_TAIL * 4))
        text = errlog.read().decode("utf-8", errors="replace")
        return " ".join(text.split())[-STDERR_TAIL:]
    return ""


def answered_401(exc: BaseException) -> bool:
    """Whether ``exc`` is an HTTP client's error for a 401 answer (legacy SSE's)."""
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None) == 401
