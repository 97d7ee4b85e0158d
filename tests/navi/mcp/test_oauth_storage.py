"""Where a server's sign-in is kept (navi/mcp/oauth_storage.py): one 0600 file per
server, never read for another URL or another redirect URI, never quoted in a log line;
a probe's registration stays in memory."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import structlog

from navi.mcp.oauth_storage import FileTokenStorage, token_file

pytest.importorskip("mcp")

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

URL = "http://127.0.0.1:9/mcp"
REDIRECT = "http://127.0.0.1:8000/mcp/oauth/callback"
SECRET = "access-token-never-logged-4b1d"


def _client(redirect: str = REDIRECT) -> OAuthClientInformationFull:
    return OAuthClientInformationFull(client_id="navi-1", redirect_uris=[redirect])  # type: ignore[list-item]


@pytest.mark.anyio
async def test_kept_in_a_private_file_for_its_url_and_redirect(tmp_path: Path) -> None:
    folder = tmp_path / "secrets" / "mcp_oauth"
    storage = FileTokenStorage(folder, "remote", URL, redirect_uri=REDIRECT)
    assert await storage.get_tokens() is None and await storage.get_client_info() is None
    await storage.set_client_info(_client())
    await storage.set_tokens(OAuthToken(access_token=SECRET, expires_in=60, refresh_token="r"))
    path = token_file(folder, "remote")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert [p.name for p in folder.iterdir()] == ["remote.json"]  # no temporary left
    again = FileTokenStorage(folder, "remote", URL, redirect_uri=REDIRECT)
    tokens = await again.get_tokens()
    assert tokens is not None and tokens.access_token == SECRET
    assert (await again.expires_at() or 0) > 0
    assert (await again.get_client_info()) == _client()

    # Another URL (the entry changed): nothing kept is sent there.
    elsewhere = FileTokenStorage(folder, "remote", "http://127.0.0.1:10/mcp", redirect_uri=REDIRECT)
    assert await elsewhere.get_tokens() is None and await elsewhere.get_client_info() is None
    # Navi on another port: the registration names another redirect URI, it is not used.
    moved = FileTokenStorage(folder, "remote", URL, redirect_uri=REDIRECT.replace("8000", "8001"))
    assert await moved.get_client_info() is None
    # A new registration drops the tokens of the old one.
    await storage.set_client_info(_client())
    assert await storage.get_tokens() is None


@pytest.mark.anyio
async def test_a_broken_file_is_reported_without_its_content(tmp_path: Path) -> None:
    path = token_file(tmp_path, "remote")
    path.write_text(json.dumps({"url": URL, "tokens": 5, "secret": SECRET}))
    with structlog.testing.capture_logs() as logs:
        assert await FileTokenStorage(tmp_path, "remote", URL).get_tokens() is None
    assert logs and logs[0]["event"] == "mcp.oauth_file_unreadable"
    assert SECRET not in repr(logs)


@pytest.mark.anyio
async def test_a_probe_keeps_its_registration_in_memory(tmp_path: Path) -> None:
    probe = FileTokenStorage(tmp_path, "remote", URL, persist_registration=False)
    await probe.set_client_info(_client())
    assert await probe.get_client_info() == _client()
    await probe.set_tokens(OAuthToken(access_token=SECRET))
    assert not token_file(tmp_path, "remote").exists()


def test_a_server_name_is_never_a_path() -> None:
    for name in ("", "../x", ".hidden", "a/b"):
        with pytest.raises(ValueError):
            token_file(Path("/tmp"), name)
