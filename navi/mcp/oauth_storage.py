"""Where a remote MCP server's sign-in is kept: its OAuth tokens and the client Navi
registered with its authorization server, one file per server entry.

``<data folder>/secrets/mcp_oauth/<server>.json``, mode 0600 in a 0700 folder, written
whole to a temporary file and renamed (a crash leaves the old file or the new one). The
file names the server's URL: when an entry's ``url`` changes, what was kept for the old
URL is not sent to the new one (the file is read as empty, and replaced at the next
sign-in). Nothing of it goes to a log line, an event or an export: the tokens are read
by the SDK's ``OAuthClientProvider`` only (navi/mcp/oauth.py).

``persist_registration=False`` (``navi doctor``'s probe): a client registered during the
probe is kept in memory only, so a probe never replaces the registration that the
running server's tokens belong to.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import structlog

if TYPE_CHECKING:
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

log = structlog.get_logger(__name__)

FOLDER = Path("secrets") / "mcp_oauth"


class _Kept(msgspec.Struct, kw_only=True):
    """The file: the server's URL, and the SDK's models as JSON text."""

    url: str
    tokens: str = ""
    # When the access token expires (Unix time; None: it did not say). The SDK keeps
    # this in memory only: a restart reads it here, so an expired token is refreshed.
    expires_at: float | None = None
    client_info: str = ""


def token_file(folder: Path, server: str) -> Path:
    """The file of ``server`` (a name config.py checked: letters, digits, ``_``, ``-``)."""
    if not server or "/" in server or server.startswith("."):
        raise ValueError(f"not a server name: {server!r}")
    return folder / f"{server}.json"


class FileTokenStorage:
    """The SDK's ``TokenStorage`` on one file (see the module's docstring)."""

    def __init__(
        self,
        folder: Path,
        server: str,
        url: str,
        *,
        redirect_uri: str = "",
        persist_registration: bool = True,
    ) -> None:
        self.path = token_file(folder, server)
        self.server = server
        self.url = url
        # A registration made for another redirect URI (Navi on another port) is not used.
        self.redirect_uri = redirect_uri
        self.persist_registration = persist_registration
        self._client_info: OAuthClientInformationFull | None = None

    def _read(self) -> _Kept:
        try:
            kept = msgspec.json.decode(self.path.read_bytes(), type=_Kept)
        except FileNotFoundError:
            return _Kept(url=self.url)
        except (OSError, msgspec.DecodeError) as exc:
            # Never the content: only that it could not be used (a new sign-in replaces it).
            log.warning("mcp.oauth_file_unreadable", server=self.server, error=type(exc).__name__)
            return _Kept(url=self.url)
        return kept if kept.url == self.url else _Kept(url=self.url)

    def _write(self, kept: _Kept) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(msgspec.json.encode(kept))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise

    async def get_tokens(self) -> OAuthToken | None:
        from mcp.shared.auth import OAuthToken

        text = self._read().tokens
        return OAuthToken.model_validate_json(text) if text else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        kept = self._read()
        if self._client_info is not None and not self.persist_registration:
            return  # tokens of a registration that is not kept would be of no use
        kept.tokens = tokens.model_dump_json(exclude_none=True)
        kept.expires_at = time.time() + int(tokens.expires_in) if tokens.expires_in else None
        self._write(kept)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull

        if self._client_info is not None:
            return self._client_info
        text = self._read().client_info
        if not text:
            return None
        client = OAuthClientInformationFull.model_validate_json(text)
        registered = [str(uri) for uri in client.redirect_uris or ()]
        if self.redirect_uri and self.redirect_uri not in registered:
            return None
        return client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if not self.persist_registration:
            self._client_info = client_info
            return
        kept = self._read()
        kept.client_info = client_info.model_dump_json(exclude_none=True)
        # Tokens belong to the client that got them: a new registration drops them.
        kept.tokens, kept.expires_at = "", None
        self._write(kept)

    async def expires_at(self) -> float | None:
        return self._read().expires_at
