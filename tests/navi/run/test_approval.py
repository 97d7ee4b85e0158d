"""The approval policy of one call (navi/run/approval.py): which rule decides, in order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from events.types import ToolCall
from navi.config import Settings, SettingsError
from navi.run.approval import Policy, approval_report, policy_for
from profiles import Profile
from tools import ToolSettings, create_registry
from tools.sandbox import sandbox_status
from tools.user_tools import effective_approval

PROFILE = Profile(id="p", name="P", system_prompt="s")


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("user_tools")
    return create_registry(ToolSettings(tools_dir=str(folder)))


def call(tool: str, **arguments: Any) -> ToolCall:
    return ToolCall(id="c1", name=tool, arguments=arguments)


def policy(tools: Any, c: ToolCall, **kw: Any) -> Policy:
    options: dict[str, Any] = {
        "profile": PROFILE,
        "operator": "",
        "user": {},
        "approved_tools": frozenset(),
    }
    options.update(kw)
    return policy_for(c, tools=tools, **options)


@pytest.mark.parametrize(
    ("c", "expected"),
    [
        (call("code_exec", code="1"), "ask"),
        (call("terminal", command="ls"), "ask"),
        (call("ssh_exec", host="h", command="id"), "ask"),
        (call("write_tool", name="t", code="x"), "ask"),
        (call("reload_tools"), "ask"),
        (call("filesystem", action="write", path="a", content="b"), "ask"),
        (call("filesystem", action="delete", path="a"), "ask"),
        (call("filesystem", action="mkdir", path="a"), "ask"),
        (call("filesystem", action="read", path="a"), "auto"),
        (call("filesystem", action="list"), "auto"),
        (call("http_request", url="https://x.example", method="POST"), "ask"),
        (call("http_request", url="https://x.example", method="delete"), "ask"),
        (call("http_request", url="https://x.example"), "auto"),
        (call("http_request", url="https://x.example", method="HEAD"), "auto"),
        (call("web_search", query="q"), "auto"),
        (call("web_view", url="https://x.example"), "auto"),
        (call("todo", action="list"), "auto"),
        (call("scratchpad", action="read"), "auto"),
        (call("list_tools"), "auto"),
        (call("tool_manual", name="todo"), "auto"),
    ],
    ids=lambda v: v.name + str(sorted(v.arguments.items())) if isinstance(v, ToolCall) else v,
)
def test_the_tools_own_defaults(tools: Any, c: ToolCall, expected: str) -> None:
    decided = policy(tools, c)
    assert decided.approval == expected
    assert decided.source == f"{c.name}'s default"


def test_the_order_of_the_rules(tools: Any) -> None:
    terminal = call("terminal", command="ls")
    todo = call("todo", action="list")
    # The operator's default for everything, over each tool's own.
    assert policy(tools, todo, operator="ask") == Policy("ask", "NAVI_TOOL_APPROVAL")
    assert policy(tools, terminal, operator="auto") == Policy("auto", "NAVI_TOOL_APPROVAL")
    # The user's own defaults over the operator's.
    mine = {"terminal": "ask"}
    assert policy(tools, terminal, operator="auto", user=mine) == Policy("ask", "your settings")
    assert policy(tools, terminal, user={"terminal": "bogus"}).source == "terminal's default"
    # The profile over everything.
    strict = Profile(id="strict", name="S", system_prompt="s", tool_policy={"terminal": "deny"})
    decided = policy(tools, terminal, profile=strict, operator="auto", user={"terminal": "auto"})
    assert decided == Policy("deny", "profile strict")
    # Approved for the session: an "ask" runs, a "deny" stays denied.
    session = frozenset({"terminal"})
    assert policy(tools, terminal, approved_tools=session) == Policy(
        "auto", "approved for this session"
    )
    assert policy(tools, terminal, profile=strict, approved_tools=session).approval == "deny"


@pytest.mark.skipif(not sandbox_status().available, reason="no bubblewrap sandbox here")
def test_user_tools_ask_unless_an_admin_confirmed_otherwise(tmp_path: Path) -> None:
    """A user tool's own ``approval`` counts only as far as enabled.json confirms it;
    it may always make itself stricter."""
    folder = tmp_path / "user_tools"
    folder.mkdir()
    body = "description = 'p'\nparameters = {'type': 'object', 'properties': {}}\n"
    body += "async def execute(params):\n    return 'x'\n"
    (folder / "quiet.py").write_text("name = 'quiet'\n" + body)
    (folder / "eager.py").write_text("name = 'eager'\napproval = 'auto'\n" + body)
    (folder / "shy.py").write_text("name = 'shy'\napproval = 'deny'\n" + body)
    (folder / "odd.py").write_text("name = 'odd'\napproval = 'sometimes'\n" + body)
    tools = create_registry(ToolSettings(tools_dir=str(folder)))
    own = {name: policy(tools, call(name)).approval for name in ("quiet", "eager", "shy")}
    assert own == {"quiet": "ask", "eager": "ask", "shy": "deny"}
    [error] = tools.load_errors
    assert "approval must be one of auto, ask, deny, got 'sometimes'" in error.error

    confirmed = {"quiet": "auto", "eager": "auto", "shy": "auto"}
    (folder / "enabled.json").write_text(json.dumps({"enabled": [], "approval": confirmed}))
    tools.reload()
    own = {name: policy(tools, call(name)).approval for name in ("quiet", "eager", "shy")}
    assert own == {"quiet": "auto", "eager": "auto", "shy": "deny"}


@pytest.mark.parametrize(
    ("declared", "confirmed", "expected"),
    [
        (None, None, "ask"),
        ("auto", None, "ask"),
        ("auto", "auto", "auto"),
        (None, "auto", "auto"),
        ("ask", "auto", "ask"),
        ("deny", "auto", "deny"),
        ("auto", "deny", "deny"),
        ("auto", "bogus", "ask"),
    ],
)
def test_effective_approval(declared: str | None, confirmed: str | None, expected: str) -> None:
    assert effective_approval(declared, confirmed) == expected


def test_settings_and_the_report() -> None:
    assert Settings.from_env({}).tool_approval == ""
    assert Settings.from_env({"NAVI_TOOL_APPROVAL": "AUTO"}).tool_approval == "auto"
    assert Settings.from_env({"NAVI_APPROVAL_TIMEOUT": "90"}).approval_timeout_s == 90.0
    assert Settings.from_env({}).approval_timeout_s is None
    with pytest.raises(SettingsError, match="NAVI_TOOL_APPROVAL"):
        Settings.from_env({"NAVI_TOOL_APPROVAL": "never"})
    level, text = approval_report("auto")
    assert level == "warning" and "WITHOUT asking" in text
    assert approval_report("")[0] == "ok" and "ask first" in approval_report("")[1]


def test_a_profile_says_its_policy_in_config_json() -> None:
    import msgspec

    from profiles import ProfileConfig

    config = msgspec.json.decode(
        b'{"id": "p", "name": "P", "tool_policy": {"terminal": "auto"}}', type=ProfileConfig
    )
    assert config.tool_policy == {"terminal": "auto"}
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(
            b'{"id": "p", "name": "P", "tool_policy": {"terminal": "yes"}}', type=ProfileConfig
        )
