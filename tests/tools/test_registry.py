from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from navi.llm.stop import StopSignal
from tools import Tool, ToolContext, ToolError, ToolRegistry, ToolResult, ToolSettings, ok
from tools.validation import ToolSchemaError

pytestmark = pytest.mark.anyio


class Echo(Tool):
    name = "echo"
    description = "Echo text."
    parameters = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }
    idempotent = True

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ok(args["text"])


class Boom(Tool):
    name = "boom"
    description = "Raises."

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise RuntimeError("kaput")


class Refuses(Tool):
    name = "refuses"
    description = "Raises a ToolError."

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise ToolError("you cannot do that here")


class Hangs(Tool):
    name = "hangs"
    description = "Never returns."
    timeout_s = 0.2

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


class Chatty(Tool):
    name = "chatty"
    description = "Too much output."

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ok("y" * 1000)


class ReturnsString(Tool):
    name = "returns_string"
    description = "A sloppy class tool."

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return "plain"  # type: ignore[return-value]


@pytest.fixture
def small_registry(settings: ToolSettings) -> ToolRegistry:
    registry = ToolRegistry(ToolSettings(tools_dir=settings.tools_dir, output_max_chars=100))
    for tool in (Echo(), Boom(), Refuses(), Hangs(), Chatty(), ReturnsString()):
        registry.register_builtin(tool)
    return registry


async def test_a_valid_call_succeeds(small_registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await small_registry.execute("echo", {"text": "hi"}, ctx)
    assert result == ToolResult(success=True, output="hi")


async def test_unknown_tool_names_the_available_ones(
    small_registry: ToolRegistry, ctx: ToolContext
) -> None:
    result = await small_registry.execute("nope", {}, ctx)
    assert not result.success
    assert result.error is not None
    assert "unknown tool 'nope'" in result.error
    assert "boom, chatty, echo" in result.error


async def test_invalid_arguments_are_a_failed_call_the_llm_can_fix(
    small_registry: ToolRegistry, ctx: ToolContext
) -> None:
    result = await small_registry.execute("echo", {"text": 5}, ctx)
    assert not result.success
    assert "argument 'text': expected string, got integer" in (result.error or "")
    assert "Expected parameters" in result.output
    missing = await small_registry.execute("echo", {}, ctx)
    assert "argument 'text': is required" in (missing.error or "")
    not_object = await small_registry.execute("echo", ["x"], ctx)
    assert "must be a JSON object, got array" in (not_object.error or "")


async def test_an_exception_is_a_failed_call(
    small_registry: ToolRegistry, ctx: ToolContext
) -> None:
    result = await small_registry.execute("boom", {}, ctx)
    assert not result.success
    assert result.error == "RuntimeError: kaput"
    assert result.failure_reason is None


async def test_a_tool_error_message_is_passed_as_is(
    small_registry: ToolRegistry, ctx: ToolContext
) -> None:
    result = await small_registry.execute("refuses", {}, ctx)
    assert result.error == "you cannot do that here"
    assert result.output == "Error: you cannot do that here"


# A stop signal that can only be waited on (a task watches it beside the call), and one
# that cancels the call's scope itself (Navi's): the registry behaves the same with both.
STOPS: dict[str, Callable[[], Any]] = {"event": anyio.Event, "scoped": StopSignal}


@pytest.mark.parametrize("kind", STOPS)
async def test_a_hanging_tool_times_out(
    small_registry: ToolRegistry, files_dir: Any, settings: ToolSettings, kind: str
) -> None:
    ctx = ToolContext.standalone("s1", files_dir, settings=settings, stop=STOPS[kind]())
    result = await small_registry.execute("hangs", {}, ctx)
    assert not result.success
    assert result.failure_reason == "timeout"
    assert "timed out after 0.2s" in (result.error or "")


@pytest.mark.parametrize("kind", STOPS)
async def test_stop_ends_a_running_call(
    small_registry: ToolRegistry, files_dir: Any, settings: ToolSettings, kind: str
) -> None:
    stop = STOPS[kind]()
    ctx = ToolContext.standalone("s1", files_dir, settings=settings, stop=stop)
    small_registry.register_builtin(_slow_hangs())
    results: list[ToolResult] = []

    async def run() -> None:
        results.append(await small_registry.execute("slow_hangs", {}, ctx))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await anyio.sleep(0.05)
        stop.set()
    assert results[0].failure_reason == "stopped"
    # A call made after the stop does not even start.
    again = await small_registry.execute("echo", {"text": "x"}, ctx)
    assert again.failure_reason == "stopped"


def _slow_hangs() -> Tool:
    class SlowHangs(Hangs):
        name = "slow_hangs"
        timeout_s = 30

    return SlowHangs()


async def test_cancellation_is_not_swallowed(
    small_registry: ToolRegistry, ctx: ToolContext
) -> None:
    small_registry.register_builtin(_slow_hangs())
    with anyio.move_on_after(0.1) as scope:
        await small_registry.execute("slow_hangs", {}, ctx)
        raise AssertionError("execute returned despite cancellation")
    assert scope.cancelled_caught


async def test_output_is_capped_with_a_marker(
    small_registry: ToolRegistry, ctx: ToolContext
) -> None:
    result = await small_registry.execute("chatty", {}, ctx)
    assert result.output == "y" * 100 + "\n[... output truncated: 900 more characters]"


async def test_a_bare_string_result_is_accepted(
    small_registry: ToolRegistry, ctx: ToolContext
) -> None:
    result = await small_registry.execute("returns_string", {}, ctx)
    assert result == ToolResult(success=True, output="plain")


def test_idempotency_per_tool_and_per_call(registry: ToolRegistry) -> None:
    assert registry.is_idempotent("web_search", {"query": "x"})
    assert not registry.is_idempotent("terminal", {"command": "ls"})
    assert not registry.is_idempotent("code_exec", {"code": "1"})
    assert registry.is_idempotent("filesystem", {"action": "read", "path": "a"})
    assert not registry.is_idempotent("filesystem", {"action": "write", "path": "a"})
    assert registry.is_idempotent("http_request", {"url": "http://x"})
    assert not registry.is_idempotent("http_request", {"url": "http://x", "method": "POST"})
    assert not registry.is_idempotent("nope", {})


@pytest.mark.parametrize(
    ("args", "approval"),
    [
        ({"url": "http://x"}, "auto"),
        ({"url": "http://x", "method": "head", "headers": {"Accept": "text/html"}}, "auto"),
        ({"url": "http://x", "method": "DELETE"}, "ask"),
        # A GET that carries a body, or asks the server to take it for another method,
        # may change something: it asks, like the method it stands for.
        ({"url": "http://x", "body": "rm=all"}, "ask"),
        ({"url": "http://x", "json": {"delete": True}}, "ask"),
        ({"url": "http://x", "headers": {"X-HTTP-Method-Override": "DELETE"}}, "ask"),
        ({"url": "http://x", "headers": {"x-method-override": "PUT"}}, "ask"),
    ],
)
def test_only_a_plain_read_of_http_request_runs_without_asking(
    registry: ToolRegistry, args: dict[str, Any], approval: str
) -> None:
    assert registry.approval_for("http_request", args) == approval
    assert registry.is_idempotent("http_request", args) is (approval == "auto")


def test_every_builtin_of_the_issue_is_registered(registry: ToolRegistry) -> None:
    assert set(registry.builtin_names) == {
        "web_search", "web_view", "filesystem", "http_request", "code_exec", "terminal",
        "ssh_exec", "image_view", "todo", "scratchpad", "reload_tools", "write_tool",
        "list_tools", "tool_manual",
    }  # fmt: skip
    for tool in registry.tools():
        assert tool.description
        assert tool.parameters["type"] == "object"


class Pydantic(Tool):
    """A tool whose schema is what pydantic makes: $defs, $ref, anyOf."""

    name = "pydantic_made"
    description = "Takes an item."
    parameters = {
        "type": "object",
        "$defs": {
            "Item": {
                "type": "object",
                "properties": {"n": {"type": "integer", "exclusiveMinimum": 0}},
                "required": ["n"],
            }
        },
        "properties": {"item": {"$ref": "#/$defs/Item"}},
        "required": ["item"],
    }

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ok(str(args["item"]["n"]))


async def test_arguments_under_a_ref_are_checked_before_the_call(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    registry.register_builtin(Pydantic())
    result = await registry.execute("pydantic_made", {"item": {"n": 0}}, ctx)
    assert not result.success
    assert (
        result.error
        == "invalid arguments for 'pydantic_made': argument 'item.n': must be > 0, got 0"
    )
    assert (await registry.execute("pydantic_made", {"item": {"n": 2}}, ctx)).output == "2"


def test_a_tool_with_an_unusable_schema_is_refused_when_registered(registry: ToolRegistry) -> None:
    class Broken(Echo):
        name = "broken"
        parameters = {"type": "object", "properties": {"text": {"type": "strnig"}}}

    class Dangling(Echo):
        name = "dangling"
        parameters = {"type": "object", "properties": {"text": {"$ref": "#/$defs/Nope"}}}

    with pytest.raises(ToolSchemaError, match=r"tool 'broken': parameters/properties/text/type:"):
        registry.register_builtin(Broken())
    with pytest.raises(
        ToolSchemaError, match=r"tool 'dangling': \$ref '#/\$defs/Nope' points at nothing"
    ):
        registry.register_builtin(Dangling())
    assert registry.get("broken") is None and registry.get("dangling") is None
