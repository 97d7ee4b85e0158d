"""The prompt routes (/mcp/prompts) at the trust boundary, in a real ``navi serve`` with a
real, partly hostile MCP server (tests/navi/mcp/mcp_prompt_server.py): a name that is
not there is a 404; arguments it did not declare, too long, not strings or missing are
a 422 before the server hears of them; no token is a 401 and an account not granted the
server's tools finds nothing (404); a huge, textless or failing prompt is a clear 502
of bounded size. After each, the prompts still fill in."""

from __future__ import annotations

from typing import Any

import pytest

from navi.mcp.prompts import ARGUMENT_MAX, TEXT_MAX
from tests.navi.mcp.prompt_support import prompt_entry, wait_for_prompts
from tests.navi.mcp.support import write_config
from tests.security.conftest import NaviServerProcess, StartNavi

pytest.importorskip("mcp")

ADMIN = {"id": "root", "token": "root-token-8c1f-33aa90", "role": "admin"}
GRANTED = {
    "id": "gwen",
    "token": "gwen-token-1b7e-90cc42",
    "role": "user",
    "tools": ["mcp__pr__slow_work"],
}
PLAIN = {"id": "pete", "token": "pete-token-4f2a-7d0e11", "role": "user"}


@pytest.fixture(scope="module")
def served(
    start_module_navi: StartNavi, tmp_path_factory: pytest.TempPathFactory
) -> NaviServerProcess:
    config = write_config(tmp_path_factory.mktemp("mcp") / "mcp.json", {"pr": prompt_entry()})
    server = start_module_navi(
        users=[ADMIN, GRANTED, PLAIN], env={"NAVI_MCP_CONFIG": str(config)}, canary_row=False
    )
    wait_for_prompts(server)
    return server


def _post(server: NaviServerProcess, path: str, body: Any = None, **kw: Any) -> Any:
    token = kw.pop("token", None)
    with server.client(token=token) as http:
        if body is None:
            return http.post(path, **kw)
        return http.post(path, json=body, **kw)


def _still_works(server: NaviServerProcess) -> None:
    done = _post(server, "/mcp/prompts/pr/review", {"arguments": {"path": "a.py"}})
    assert done.status_code == 200, done.text
    assert done.json()["text"] == "Please review the file a.py."


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/mcp/prompts/nope/review", "no MCP server 'nope' with a prompt 'review'"),
        ("/mcp/prompts/pr/nope", "no MCP server 'pr' with a prompt 'nope'"),
        ("/mcp/prompts/pr/" + "x" * 5000, "no MCP server 'pr' with a prompt 'xxx"),
    ],
)
def test_an_unknown_server_or_prompt_is_a_404(
    served: NaviServerProcess, path: str, said: str
) -> None:
    response = _post(served, path, {"arguments": {}})
    assert response.status_code == 404
    assert response.json()["error"].startswith(said)
    assert len(response.text) < 300
    _still_works(served)


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"path": "a", "secret": "x"}, "the prompt 'review' has no argument 'secret'"),
        ({"path": "a" * (ARGUMENT_MAX + 1)}, "argument 'path' is 4001 characters long"),
        ({"path": 7}, "argument 'path' must be a string"),
        ({"path": {"nested": "x"}}, "argument 'path' must be a string"),
        ({"focus": "x"}, "the prompt 'review' needs 'path'"),
        ({"path": "   "}, "the prompt 'review' needs 'path'"),
    ],
)
def test_bad_arguments_are_a_422_and_never_reach_the_server(
    served: NaviServerProcess, arguments: dict[str, Any], said: str
) -> None:
    response = _post(served, "/mcp/prompts/pr/review", {"arguments": arguments})
    assert response.status_code == 422, response.text
    assert response.json()["error"].startswith(said)
    _still_works(served)


def test_a_malformed_or_oversized_body_is_refused(served: NaviServerProcess) -> None:
    assert _post(served, "/mcp/prompts/pr/review", {"arguments": [1]}).status_code == 422
    assert _post(served, "/mcp/prompts/pr/review", {"other": 1}).status_code == 422
    big = {"arguments": {"path": "a" * 70_000}}
    assert _post(served, "/mcp/prompts/pr/review", big).status_code == 413
    not_json = _post(
        served,
        "/mcp/prompts/pr/review",
        content=b"{no",
        headers={"content-type": "application/json"},
    )
    assert not_json.status_code == 400
    _still_works(served)


def test_without_a_token_nothing(served: NaviServerProcess) -> None:
    with served.client(token="") as http:
        assert http.get("/mcp/prompts").status_code == 401
        assert (
            http.post("/mcp/prompts/pr/review", json={"arguments": {"path": "a"}}).status_code
            == 401
        )
    with served.client(token="wrong-token") as http:
        assert http.get("/mcp/prompts").status_code == 401


def test_an_account_not_granted_the_servers_tools_finds_no_prompt(
    served: NaviServerProcess,
) -> None:
    with served.client(token=PLAIN["token"]) as http:
        assert http.get("/mcp/prompts").json() == []
        refused = http.post("/mcp/prompts/pr/review", json={"arguments": {"path": "a"}})
    assert refused.status_code == 404
    granted = wait_for_prompts(served, token=GRANTED["token"])
    assert {p["name"] for p in granted} >= {"review", "summarize"}
    done = _post(served, "/mcp/prompts/pr/summarize", token=GRANTED["token"])
    assert done.status_code == 200, done.text


@pytest.mark.parametrize(
    ("name", "said"),
    [
        (
            "huge",
            f"the MCP server's prompt is 200000 characters long; Navi takes at most {TEXT_MAX}",
        ),
        ("blank", "the MCP server 'pr' gave the prompt 'blank' without text"),
        ("broken", "the MCP server 'pr' refused the call"),
    ],
)
def test_a_hostile_prompt_is_a_bounded_clear_502(
    served: NaviServerProcess, name: str, said: str
) -> None:
    response = _post(served, f"/mcp/prompts/pr/{name}")
    assert response.status_code == 502, response.text
    assert response.json()["error"].startswith(said)
    assert len(response.content) < 1000
    _still_works(served)
