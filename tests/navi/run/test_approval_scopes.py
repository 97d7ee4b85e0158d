"""What a call's card says and what "for this session" covers (navi/run/approval.py with
each tool's ``describe``): the kind of action and its target, a host for web reads, a
host and method for other requests; the outbound consent rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from events.types import ToolApprovalDecided, ToolCall, ToolCompleted, UserMessage
from navi.run.approval import Allowances, CallConsent, Policy, explicit_auto, policy_for
from profiles import Profile
from projections import consent
from tools import ProfileInfo, ToolContext, ToolSettings, create_registry
from tools.base import CallDescription

PROFILE = Profile(id="p", name="P", system_prompt="s")
SMART = Profile(
    id="smart",
    name="Smart home",
    system_prompt="s",
    allow_private_urls=True,
    tool_policy={"http_request": "auto"},
)


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("user_tools")
    return create_registry(ToolSettings(tools_dir=str(folder)))


@pytest.fixture
def files(tmp_path: Path) -> Path:
    return tmp_path / "files" / "0b6a1b8e-6a55-4d4e-9f55-1d3c1a6a9f00"


def call(tool: str, **arguments: Any) -> ToolCall:
    return ToolCall(id="c1", name=tool, arguments=arguments)


def chat(*events: Any) -> Allowances:
    folded = consent.INITIAL
    for event in events:
        folded = consent.evolve(folded, event)
    return Allowances(own=folded, chat=folded)


def approved(key: str) -> ToolApprovalDecided:
    return ToolApprovalDecided(call_id="x", approved=True, scope="session", scope_key=key)


def decide(
    tools: Any, files: Path, c: ToolCall, allowances: Allowances = Allowances(), **kw: Any
) -> tuple[Policy, CallDescription]:
    context = kw.pop("context", {})
    described: CallDescription = tools.describe(
        c.name, c.arguments, ToolContext.standalone("s", files, **context)
    )
    options: dict[str, Any] = {"profile": PROFILE, "operator": "", "user": {}}
    options.update(kw)
    found = policy_for(c, tools=tools, allowances=allowances, description=described, **options)
    return found, described


def test_a_file_write_for_the_session_does_not_cover_a_delete(tools: Any, files: Path) -> None:
    write = call("filesystem", action="write", path="notes.txt", content="x")
    policy, described = decide(tools, files, write)
    assert policy.approval == "ask"
    assert described.summary == f"Write the file {files.resolve()}/notes.txt"
    assert described.target == f"{files.resolve()}/notes.txt"
    assert policy.asked_by == "Navi asks before file changes"
    assert policy.scope is not None
    assert policy.scope.label == "Allow file writes in this chat"
    # Approved for the session: the next write runs, a delete of the same file asks.
    allowances = chat(approved(policy.scope.key))
    assert decide(tools, files, write, allowances)[0].approval == "auto"
    again = call("filesystem", action="write", path="other.txt", content="y")
    assert decide(tools, files, again, allowances)[0].approval == "auto"
    delete = call("filesystem", action="delete", path="notes.txt")
    policy, described = decide(tools, files, delete, allowances)
    assert policy.approval == "ask" and described.risk.startswith("deletes a file")
    assert policy.scope is not None and policy.scope.label == "Allow deleting files in this chat"


def test_writes_in_another_allowed_folder_are_their_own_scope(
    tools: Any, files: Path, tmp_path: Path
) -> None:
    other = tmp_path / "documents"
    settings = ToolSettings(fs_allowed_paths=(str(other),))
    inside = call("filesystem", action="write", path="a.txt", content="x")
    policy, _ = decide(tools, files, inside, context={"settings": settings})
    assert policy.scope is not None
    allowances = chat(approved(policy.scope.key))
    elsewhere = call("filesystem", action="write", path=str(other / "a.txt"), content="x")
    policy, described = decide(tools, files, elsewhere, allowances, context={"settings": settings})
    assert policy.approval == "ask" and described.target == str(other.resolve() / "a.txt")
    assert policy.scope is not None
    assert policy.scope.label == f"Allow file writes under {other.resolve()} in this chat"


def test_code_and_commands_say_what_the_session_scope_allows(tools: Any, files: Path) -> None:
    policy, described = decide(tools, files, call("code_exec", code="print(1)"))
    assert policy.scope is not None
    assert policy.scope.label == "Allow any Python code in this chat"
    assert described.risk.startswith("runs Python in a sandbox without network")
    assert policy.asked_by == "Navi asks before running code"
    # With the profile's network, the card and its scope say so: the scope without it
    # does not cover it.
    networked = {"profile": ProfileInfo(id="server_admin", tool_network=True)}
    policy_net, described = decide(
        tools, files, call("code_exec", code="print(1)"), context=networked
    )
    assert policy_net.scope is not None and policy_net.scope.key != policy.scope.key
    assert "with network access" in described.risk
    assert (
        decide(
            tools,
            files,
            call("code_exec", code="1"),
            chat(approved(policy.scope.key)),
            context=networked,
        )[0].approval
        == "ask"
    )
    policy, described = decide(tools, files, call("terminal", command="ls -la"))
    assert policy.scope is not None and policy.scope.label == "Allow any command in this chat"
    assert described.target == "ls -la"


def test_entering_a_profile_names_it(tools: Any, files: Path) -> None:
    # The registry's switch_profile comes from the navi layer; the tool is tested there.
    from navi.session_tools import SwitchProfileTool
    from profiles import ProfileRegistry

    registry = ProfileRegistry.load()
    tool = SwitchProfileTool(registry)
    described = tool.describe({"profile_id": "server_admin"}, ToolContext.standalone("s", files))
    admin = registry.get("server_admin")
    assert admin.name in described.summary and admin.name in described.target
    assert "network" in described.risk
    assert described.scope is not None and described.scope.key == "switch_profile:server_admin"


def test_web_reads_ask_for_a_host_not_allowed_in_the_chat(tools: Any, files: Path) -> None:
    for c in (
        call("http_request", url="https://a.example/x"),
        call("web_view", url="https://a.example/x"),
        call("image_view", source="https://a.example/x.png"),
    ):
        policy, described = decide(tools, files, c)
        assert policy.approval == "ask", c.name
        assert policy.source == "outbound consent"
        assert "a.example" in policy.asked_by and described.target == "GET a.example"
        assert policy.scope is not None
        assert policy.scope.label == "Allow requests to a.example in this chat"
    # The user named the host, or a person approved it for the chat: no question.
    read = call("web_view", url="https://a.example/x")
    assert (
        decide(tools, files, read, chat(UserMessage(text="read a.example")))[0].approval == "auto"
    )
    assert decide(tools, files, read, chat(approved("host:a.example")))[0].approval == "auto"
    # Host A approved: host B still asks, and so does A on another port.
    b = call("http_request", url="https://b.example/x?notes=secret")
    assert decide(tools, files, b, chat(approved("host:a.example")))[0].approval == "ask"
    port = call("http_request", url="https://a.example:8443/x")
    assert decide(tools, files, port, chat(approved("host:a.example")))[0].approval == "ask"


def test_a_post_for_the_session_is_per_host_and_method(tools: Any, files: Path) -> None:
    post = call("http_request", url="https://api.example/items", method="POST", json={})
    policy, described = decide(tools, files, post)
    assert policy.approval == "ask" and described.target == "POST api.example"
    assert policy.scope is not None
    assert policy.scope.label == "Allow POST requests to api.example in this chat"
    allowances = chat(approved(policy.scope.key))
    assert decide(tools, files, post, allowances)[0].approval == "auto"
    delete = call("http_request", url="https://api.example/items/1", method="DELETE")
    assert decide(tools, files, delete, allowances)[0].approval == "ask"
    elsewhere = call("http_request", url="https://other.example/items", method="POST", json={})
    assert decide(tools, files, elsewhere, allowances)[0].approval == "ask"
    # A host trusted with a POST may be read.
    read = call("http_request", url="https://api.example/items")
    assert decide(tools, files, read, allowances)[0].approval == "auto"


def test_a_search_result_may_be_read_but_not_its_host(tools: Any, files: Path) -> None:
    searched = chat(
        ToolCompleted(
            call_id="s1",
            name="web_search",
            output="…",
            metadata={"urls": ["https://found.example/article"]},
        )
    )
    exact = call("web_view", url="https://found.example/article")
    assert decide(tools, files, exact, searched)[0].approval == "auto"
    # The page of a result may tell the model to send data to its own host: asks.
    for url in (
        "https://found.example/collect?notes=secret",
        "https://secret@found.example/article",
    ):
        assert decide(tools, files, call("http_request", url=url), searched)[0].approval == "ask"


def test_private_addresses_ask_even_when_a_profile_says_auto(tools: Any, files: Path) -> None:
    relay = call("http_request", url="http://10.99.0.2/relay?on=1")
    policy, _ = decide(tools, files, relay, profile=SMART)
    assert policy.approval == "ask"
    assert "10.99.0.2" in policy.asked_by and "private" in policy.asked_by
    # The profile's "auto" holds for public hosts, and for the LAN host the user named.
    public = call("http_request", url="https://api.example/x", method="POST", json={})
    assert decide(tools, files, public, profile=SMART)[0].approval == "auto"
    named = chat(UserMessage(text="switch on the relay at 10.99.0.2"))
    assert decide(tools, files, relay, named, profile=SMART)[0].approval == "auto"
    # A search result on a private host does not count.
    found = chat(
        ToolCompleted(
            call_id="s1", name="web_search", output="…", metadata={"urls": ["http://10.0.0.1/"]}
        )
    )
    assert (
        decide(tools, files, call("web_view", url="http://10.0.0.1/"), found)[0].approval == "ask"
    )


def test_test_rigs_turn_the_consent_rule_off(tools: Any, files: Path) -> None:
    read = call("http_request", url="https://a.example/x")
    assert decide(tools, files, read, operator="auto")[0].approval == "auto"


def test_a_subagents_scope_says_so(tools: Any, files: Path) -> None:
    c = call("code_exec", code="1")
    described = tools.describe(c.name, c.arguments, ToolContext.standalone("s", files))
    policy = policy_for(
        c, tools=tools, profile=PROFILE, operator="", user={}, description=described, subagent=True
    )
    assert policy.scope is not None
    assert policy.scope.label == "Allow any Python code for this subagent"


def test_a_calls_requests_reach_only_what_the_user_allowed() -> None:
    """As the call runs: a redirect to a host the call could not go to without asking
    is refused; private addresses only where the user allowed them."""
    from tools.base import Reach

    named = chat(UserMessage(text="read https://a.example/"))
    running = CallConsent((Reach("https://a.example/x"),), named, explicit=False, decision=None)
    assert running.private_ok  # a.example was named: if it is on the LAN, so be it
    assert running.refusal("https://a.example/y") is None
    refused = running.refusal("https://b.example/collect?notes=secret")
    assert refused is not None and "b.example" in refused
    unnamed = CallConsent(
        (Reach("https://found.example/x"),), Allowances(), explicit=True, decision=None
    )
    assert not unnamed.private_ok  # it ran without asking: no private address behind it
    assert unnamed.refusal("https://b.example/") is None  # explicit auto: public is fine
    assert unnamed.refusal("http://192.168.1.1/") is not None
    # A person approved the call: its host, whatever its address, may be reached.
    yes = ToolApprovalDecided(call_id="c1", approved=True)
    for url in ("http://10.0.0.5/", "https://ha.example.net/"):
        lan = CallConsent((Reach(url),), Allowances(), explicit=False, decision=yes)
        assert lan.private_ok, url
    no = ToolApprovalDecided(call_id="c1", approved=False)
    assert not CallConsent(
        (Reach("http://10.0.0.5/"),), Allowances(), explicit=False, decision=no
    ).private_ok


def test_explicit_auto() -> None:
    assert explicit_auto("http_request", SMART, {})
    assert not explicit_auto("web_view", SMART, {})
    assert explicit_auto("web_view", PROFILE, {"web_view": "auto"})
    strict = Profile(id="s", name="S", system_prompt="s", tool_policy={"web_view": "ask"})
    assert not explicit_auto("web_view", strict, {"web_view": "auto"})


def test_an_open_world_mcp_tool_asks_for_the_hosts_of_its_urls(files: Path) -> None:
    """An MCP tool that says it reaches the outside world (``openWorldHint``) and only
    reads: the http(s) URLs among its arguments follow the host rule. (Described only:
    no call reaches the server.)"""
    from mcp_types import Tool as McpToolInfo
    from mcp_types import ToolAnnotations

    from navi.mcp.tools import adapt

    class Caller:
        server = "web"

        async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
            raise AssertionError("only described")

    info = McpToolInfo(
        name="fetch",
        input_schema={"type": "object", "properties": {"url": {"type": "string"}}},
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True),
    )
    tool = adapt(info, name="mcp__web__fetch", caller=Caller(), approval=None, timeout_s=30)
    registry = create_registry(ToolSettings(tools_dir=str(files.parent / "user_tools")))
    registry.set_external("mcp:web", [tool])
    fetch = call("mcp__web__fetch", url="https://collect.example/?notes=secret")
    policy, described = decide(registry, files, fetch)
    assert described.reach and policy.approval == "ask"
    assert policy.scope is not None and policy.scope.key == "host:collect.example"
    named = chat(UserMessage(text="fetch https://collect.example/"))
    assert decide(registry, files, fetch, named)[0].approval == "auto"
    # Without the hint, its arguments are its own business (it is read-only: it runs).
    closed = McpToolInfo(
        name="lookup",
        input_schema={"type": "object"},
        annotations=ToolAnnotations(read_only_hint=True),
    )
    lookup = adapt(closed, name="mcp__web__lookup", caller=Caller(), approval=None, timeout_s=30)
    registry.set_external("mcp:web", [tool, lookup])
    other = call("mcp__web__lookup", url="https://collect.example/")
    assert decide(registry, files, other)[0].approval == "auto"
