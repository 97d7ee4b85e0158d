"""The OAuth sign-in of one remote server's connection, against a real OAuth-protected
MCP server (tests/navi/mcp/oauth_server.py): the 401 becomes "needs sign-in" with a
link, the authorization server's answer finishes it, the kept tokens serve the next
connection, an expired one is refreshed, and a refused sign-in is said so."""

from __future__ import annotations

import json
import logging
import stat
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
import structlog

from navi.mcp.client import ServerConnection
from navi.mcp.config import parse_config
from navi.mcp.oauth import OAuthPlaces, SignIns
from navi.mcp.oauth_storage import token_file
from tests.navi.mcp.oauth_server import OAuthMcpServer, oauth_mcp_server
from tests.navi.mcp.support import http_server
from tools import ToolRegistry

pytest.importorskip("mcp")

NAVI = "http://127.0.0.1:8123"


@pytest.fixture(params=["http", "sse"])
def remote(request: pytest.FixtureRequest) -> Iterator[OAuthMcpServer]:
    with oauth_mcp_server(transport=request.param) as server:
        yield server


def _connection(
    url: str, registry: ToolRegistry, places: OAuthPlaces, sign_ins: SignIns
) -> ServerConnection:
    kind = "sse" if url.endswith("/sse") else "http"
    config = parse_config(json.dumps({"mcpServers": {"remote": {"url": url, "type": kind}}}))
    return ServerConnection(
        config.servers["remote"], registry, timeout_s=10, oauth=places, sign_ins=sign_ins
    )


async def _approve(sign_ins: SignIns, *, refuse: bool = False) -> str:
    """What the user's browser does: open the authorization page, come back with its
    answer (the authorization server approves at once). The server it finished."""
    flow = sign_ins.pending("remote")
    assert flow is not None
    async with httpx.AsyncClient() as http:
        answer = await http.get(flow.url)
    assert answer.status_code == 302, answer.text
    back = urlsplit(answer.headers["location"])
    assert f"{back.scheme}://{back.netloc}{back.path}" == NAVI + "/mcp/oauth/callback"
    query = {k: v[0] for k, v in parse_qs(back.query).items()}
    finished = sign_ins.finish(
        query["state"],
        code="" if refuse else query["code"],
        iss=query.get("iss"),
        refused="access_denied" if refuse else "",
    )
    assert finished == "remote"
    return finished


async def _until(check: object, limit_s: float = 20.0) -> None:
    with anyio.fail_after(limit_s):
        while not check():  # type: ignore[operator]
            await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_sign_in_then_tokens_kept_reused_and_refreshed(
    tmp_path: Path, remote: OAuthMcpServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as logs:
        await _sign_in_reuse_refresh(tmp_path, remote)
    # Not one token nor the client secret in a log line, Navi's or a library's.
    kept = token_file(tmp_path / "secrets" / "mcp_oauth", "remote").read_text()
    secrets = [*remote.provider.access, *remote.provider.refresh]
    client = json.loads(json.loads(kept)["client_info"])
    secrets += [client["client_secret"]] if client.get("client_secret") else []
    assert len(secrets) >= 4
    logged = repr(logs) + caplog.text
    assert "mcp.sign_in_needed" in logged
    assert not [s for s in secrets if s in logged]


async def _sign_in_reuse_refresh(tmp_path: Path, remote: OAuthMcpServer) -> None:
    places = OAuthPlaces(folder=tmp_path / "secrets" / "mcp_oauth", base_url=NAVI)
    sign_ins, registry = SignIns(), ToolRegistry()
    connection = _connection(remote.url, registry, places, sign_ins)
    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.run)
        await connection.first_attempt.wait()
        status = connection.status()
        assert status.state == "needs-sign-in", status
        assert status.sign_in == NAVI + "/mcp/remote/sign-in"
        assert f"sign in at {NAVI}/mcp/remote/sign-in" in status.describe()
        assert remote.provider.redirect_uris == []  # nobody has been to the page yet
        await _approve(sign_ins)
        await _until(lambda: connection.status().state == "running")
        assert "mcp__remote__echo" in registry.names()
        result = await connection.call_tool("echo", {"text": "signed"})
        assert remote.calls == ["signed"]
        assert "echo: signed" in str(result.content)
        tg.cancel_scope.cancel()
    assert remote.provider.redirect_uris == [NAVI + "/mcp/oauth/callback"]

    kept = token_file(places.folder, "remote")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    assert json.loads(kept.read_text())["url"] == remote.url

    # A new connection (Navi restarted) uses the kept tokens: no sign-in.
    again = _connection(remote.url, ToolRegistry(), places, SignIns())
    async with anyio.create_task_group() as tg:
        tg.start_soon(again.run)
        await again.first_attempt.wait()
        assert again.status().state == "running"
        tg.cancel_scope.cancel()
    assert remote.provider.authorizations == 1
    assert remote.provider.refreshes == 0

    # An hour later: the kept access token has expired; it is refreshed, not re-signed.
    content = json.loads(kept.read_text())
    content["expires_at"] = 1.0
    kept.write_text(json.dumps(content))
    later = _connection(remote.url, ToolRegistry(), places, SignIns())
    async with anyio.create_task_group() as tg:
        tg.start_soon(later.run)
        await later.first_attempt.wait()
        assert later.status().state == "running", later.status()
        await later.call_tool("echo", {"text": "refreshed"})
        tg.cancel_scope.cancel()
    assert remote.provider.refreshes == 1
    assert remote.provider.authorizations == 1
    assert remote.calls == ["signed", "refreshed"]


@pytest.mark.anyio
async def test_a_refused_sign_in_is_said_and_a_new_link_offered(
    tmp_path: Path, remote: OAuthMcpServer
) -> None:
    places = OAuthPlaces(folder=tmp_path / "oauth", base_url=NAVI)
    sign_ins = SignIns()
    connection = _connection(remote.url, ToolRegistry(), places, sign_ins)
    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.run)
        await connection.first_attempt.wait()
        first = sign_ins.pending("remote")
        assert first is not None
        await _approve(sign_ins, refuse=True)
        await _until(lambda: "refused" in connection.status().error)
        assert "its OAuth sign-in failed: the sign-in was refused: access_denied" in (
            connection.status().describe()
        )
        # The connection starts again and asks again, with a new state.
        await _until(lambda: connection.status().state == "needs-sign-in")
        second = sign_ins.pending("remote")
        assert second is not None and second.state != first.state
        assert sign_ins.finish(first.state, code="x", iss=None) is None
        tg.cancel_scope.cancel()
    assert sign_ins.servers() == []  # a stopped connection leaves no sign-in waiting
    assert not token_file(places.folder, "remote").exists() or not json.loads(
        token_file(places.folder, "remote").read_text()
    ).get("tokens")


@pytest.mark.anyio
async def test_a_server_that_wants_no_sign_in_is_reached_without_the_oauth_provider(
    tmp_path: Path,
) -> None:
    places = OAuthPlaces(folder=tmp_path / "oauth", base_url=NAVI)
    with http_server(tmp_path / "log") as url:
        connection = _connection(url, ToolRegistry(), places, SignIns())
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.run)
            await connection.first_attempt.wait()
            assert connection.status().state == "running"
            # The SDK's provider serialises requests until their answers' headers come.
            assert not connection._signs_in
            tg.cancel_scope.cancel()
    assert not places.folder.exists()
