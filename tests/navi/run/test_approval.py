"""The approval policy of one call (navi/run/approval.py): which rule decides, in order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from events.types import ToolApprovalDecided, ToolCall, UserMessage
from navi.config import Settings, SettingsError
from navi.run.approval import Allowances, Policy, Scope, approval_report, policy_for
from profiles import Profile
from projections import consent
from tools import ToolContext, ToolSettings, create_registry
from tools.base import CallDescription
from tools.sandbox import sandbox_status
from tools.user_tools import effective_approval

PROFILE = Profile(id="p", name="P", system_prompt="s")


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("user_tools")
    return create_registry(ToolSettings(tools_dir=str(folder)))


def call(tool: str, **arguments: Any) -> ToolCall:
    return ToolCall(id="c1", name=tool, arguments=arguments)


FILES = Path("/srv/navi/files/0b6a1b8e-6a55-4d4e-9f55-1d3c1a6a9f00")


def described(tools: Any, c: ToolCall, **context: Any) -> CallDescription:
    ctx = ToolContext.standalone("s", FILES, **context)
    result: CallDescription = tools.describe(c.name, c.arguments, ctx)
    return result


def policy(tools: Any, c: ToolCall, **kw: Any) -> Policy:
    options: dict[str, Any] = {
        "profile": PROFILE,
        "operator": "",
        "user": {},
        "description": described(tools, c),
    }
    options.update(kw)
    return policy_for(c, tools=tools, **options)


def said(user: str = "", *scopes: str, subagent: bool = False) -> Allowances:
    """What a chat allows after the user said ``user`` and a person approved ``scopes``."""
    chat = consent.INITIAL
    chat = consent.evolve(chat, UserMessage(text=user))
    for key in scopes:
        chat = consent.evolve(
            chat, ToolApprovalDecided(call_id="x", approved=True, scope="session", scope_key=key)
        )
    return Allowances(own=chat, chat=chat)


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
        (call("image_view", source="https://x.example/a.png"), "auto"),
        (call("todo", action="list"), "auto"),
        (call("scratchpad", action="read"), "auto"),
        (call("list_tools"), "auto"),
        (call("tool_manual", name="todo"), "auto"),
    ],
    ids=lambda v: v.name + str(sorted(v.arguments.items())) if isinstance(v, ToolCall) else v,
)
def test_the_tools_own_defaults(tools: Any, c: ToolCall, expected: str) -> None:
    # (x.example named by the user: web reads of it need no consent question)
    decided = policy(tools, c, allowances=said("look at x.example"))
    assert decided.approval == expected
    assert decided.source == f"{c.name}'s default"
    assert decided.asked_by and "default" not in decided.asked_by  # plain words


def test_the_order_of_the_rules(tools: Any) -> None:
    terminal = call("terminal", command="ls")
    todo = call("todo", action="list")
    floor = "the operator (NAVI_TOOL_APPROVAL=ask)"
    any_command = Scope("terminal", "Allow any command in this chat")
    # The operator's default for everything, over each tool's own.
    todo_scope = Scope("todo", "Allow every todo call in this chat")
    assert policy(tools, todo, operator="ask") == Policy(
        "ask", "NAVI_TOOL_APPROVAL", floor, todo_scope
    )
    assert policy(tools, terminal, operator="auto").approval == "auto"
    # The user's own defaults over the operator's.
    mine = {"terminal": "ask"}
    assert policy(tools, terminal, operator="auto", user=mine) == Policy(
        "ask", "your settings", "your settings", any_command
    )
    assert policy(tools, terminal, user={"terminal": "bogus"}).source == "terminal's default"
    # The profile over everything.
    strict = Profile(id="strict", name="S", system_prompt="s", tool_policy={"terminal": "deny"})
    decided = policy(tools, terminal, profile=strict, operator="auto", user={"terminal": "auto"})
    assert decided == Policy("deny", "profile strict", "profile S")
    # Approved for the session: an "ask" runs, a "deny" stays denied.
    session = said("", "terminal")
    assert policy(tools, terminal, allowances=session).approval == "auto"
    assert policy(tools, terminal, allowances=session).source == "approved for this session"
    assert policy(tools, terminal, profile=strict, allowances=session).approval == "deny"
    # An older log approved the whole tool: it still does.
    whole = Allowances(whole_tools=frozenset({"terminal"}))
    assert policy(tools, terminal, allowances=whole).approval == "auto"


def test_the_operators_ask_is_a_floor(tools: Any) -> None:
    """NAVI_TOOL_APPROVAL=ask: neither a profile nor the user's settings make a call run
    at once; a deny stays denied; what a person approved for the chat still holds."""
    code = call("code_exec", code="print(1)")
    loose = Profile(id="loose", name="Loose", system_prompt="s", tool_policy={"code_exec": "auto"})
    for options in ({"user": {"code_exec": "auto"}}, {"profile": loose}):
        decided = policy(tools, code, operator="ask", **options)
        assert decided.approval == "ask", options
        assert decided.asked_by == "the operator (NAVI_TOOL_APPROVAL=ask)"
    assert policy(tools, code, operator="ask", user={"code_exec": "deny"}).approval == "deny"
    approved = said("", "code_exec")
    assert policy(tools, code, operator="ask", allowances=approved).approval == "auto"
    # Without the floor, the user's own "auto" is theirs to set.
    assert policy(tools, code, user={"code_exec": "auto"}).approval == "auto"


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
    level, text = approval_report("ask")
    assert level == "ok" and "floor" in text and "no profile or user setting" in text


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
