"""The MCP servers' prompts over REST, against a real MCP server (mcp_prompt_server.py)
in a real ``navi serve``: listed with their descriptions and arguments, and filled in."""

from __future__ import annotations

import pytest

from tests.navi.mcp.prompt_support import prompt_entry, wait_for_prompts
from tests.navi.mcp.support import write_config
from tests.security.conftest import NaviServerProcess, StartNavi

pytest.importorskip("mcp")


@pytest.fixture(scope="module")
def served(
    start_module_navi: StartNavi, tmp_path_factory: pytest.TempPathFactory
) -> NaviServerProcess:
    config = write_config(tmp_path_factory.mktemp("mcp") / "mcp.json", {"pr": prompt_entry()})
    return start_module_navi(env={"NAVI_MCP_CONFIG": str(config)}, canary_row=False)


def test_the_menu_lists_each_prompt_with_its_server_and_arguments(
    served: NaviServerProcess,
) -> None:
    listed = {p["name"]: p for p in wait_for_prompts(served)}
    assert set(listed) == {"review", "summarize", "huge", "blank", "broken"}
    review = listed["review"]
    assert review["server"] == "pr"
    assert review["description"] == "Review a file of the project."
    assert review["arguments"] == [
        {"name": "path", "description": "", "required": True},
        {"name": "focus", "description": "", "required": False},
    ]
    assert listed["summarize"]["arguments"] == []


def test_a_prompt_is_filled_in_with_its_arguments(served: NaviServerProcess) -> None:
    wait_for_prompts(served)
    with served.client() as http:
        filled = http.post(
            "/mcp/prompts/pr/review", json={"arguments": {"path": "src/app.py", "focus": "errors"}}
        )
        bare = http.post("/mcp/prompts/pr/summarize")
    assert filled.status_code == 200, filled.text
    assert filled.json() == {
        "server": "pr",
        "name": "review",
        "text": "Please review the file src/app.py. Look closely at errors.",
    }
    assert bare.status_code == 200, bare.text
    assert bare.json()["text"] == "Summarize what we said so far."


def test_nothing_is_sent_to_a_chat(served: NaviServerProcess) -> None:
    sid = served.create_session()
    before = len(served.llm.requests)
    with served.client() as http:
        assert http.post("/mcp/prompts/pr/summarize").status_code == 200
    assert served.session(sid)["messages"] == []
    assert len(served.llm.requests) == before
