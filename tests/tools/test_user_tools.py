from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import msgspec
import pytest

from tools import ToolContext, ToolRegistry, ToolSettings, create_registry
from tools.sandbox import sandbox_status

pytestmark = pytest.mark.anyio

MODULE_TOOL = """
name = "shout"
description = "Upper-cases text."
parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

async def execute(params: dict) -> str:
    return params["text"].upper()
"""

CLASS_TOOL = """
from typing import Any
from tools import Tool, ToolResult, ok

class Reverse(Tool):
    name = "reverse"
    description = "Reverses text."
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}}
    idempotent = True

    async def call(self, args: dict[str, Any], ctx: Any) -> ToolResult:
        return ok(args["text"][::-1], session=ctx.session_id)
"""

PLAIN_CLASS_TOOL = """
class Counter:
    name = "count_words"
    description = "Counts words."
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}}

    async def execute(self, params):
        return {"words": len(params.get("text", "").split())}
"""

SYNC_WITH_CTX = """
name = "whoami_tool"
description = "Says which session it runs in."
parameters = {"type": "object", "properties": {}}

def execute(params, ctx):
    return f"session {ctx.session_id}"
"""


def write(tools_dir: Path, filename: str, source: str) -> Path:
    path = tools_dir / filename
    path.write_text(source, encoding="utf-8")
    return path


async def test_module_and_class_formats_load_and_run(
    tools_dir: Path, settings: ToolSettings, ctx: ToolContext
) -> None:
    write(tools_dir, "shout.py", MODULE_TOOL)
    write(tools_dir, "reverse.py", CLASS_TOOL)
    write(tools_dir, "counter.py", PLAIN_CLASS_TOOL)
    write(tools_dir, "whoami.py", SYNC_WITH_CTX)
    registry = create_registry(settings)
    assert set(registry.user_names) == {"shout", "reverse", "count_words", "whoami_tool"}
    assert registry.load_errors == ()

    assert (await registry.execute("shout", {"text": "hi"}, ctx)).output == "HI"
    reversed_ = await registry.execute("reverse", {"text": "abc"}, ctx)
    assert reversed_.output == "cba"
    assert reversed_.metadata == {"session": "s1"}
    assert registry.is_idempotent("reverse", {"text": "x"})
    assert not registry.is_idempotent("shout", {"text": "x"})
    counted = await registry.execute("count_words", {"text": "a b c"}, ctx)
    assert counted.output == '{"words": 3}'
    assert (await registry.execute("whoami_tool", {}, ctx)).output == "session s1"


async def test_user_tool_arguments_are_validated(
    tools_dir: Path, settings: ToolSettings, ctx: ToolContext
) -> None:
    write(tools_dir, "shout.py", MODULE_TOOL)
    registry = create_registry(settings)
    result = await registry.execute("shout", {"text": 1}, ctx)
    assert "argument 'text': expected string, got integer" in (result.error or "")


async def test_an_exception_in_a_user_tool_is_a_failed_call(
    tools_dir: Path, settings: ToolSettings, ctx: ToolContext
) -> None:
    write(
        tools_dir,
        "fails.py",
        'name = "fails"\ndescription = "d"\nparameters = {"type": "object", "properties": {}}\n'
        "async def execute(params):\n    raise ValueError('no luck')\n",
    )
    registry = create_registry(settings)
    result = await registry.execute("fails", {}, ctx)
    assert not result.success
    assert result.error == "ValueError: no luck"


def test_one_broken_file_is_reported_and_the_rest_load(
    tools_dir: Path, settings: ToolSettings
) -> None:
    write(tools_dir, "shout.py", MODULE_TOOL)
    broken = write(tools_dir, "broken.py", "name = 'broken'\ndef execute(params:\n")
    raises = write(tools_dir, "raises.py", "raise RuntimeError('import-time failure')\n")
    empty = write(tools_dir, "empty.py", "x = 1\n")
    bad_schema = write(
        tools_dir,
        "bad_schema.py",
        'name = "bad_schema"\ndescription = "d"\nparameters = {"type": "string"}\n'
        "async def execute(params):\n    return ''\n",
    )
    bad_arity = write(
        tools_dir,
        "bad_arity.py",
        'name = "bad_arity"\ndescription = "d"\nparameters = {"type": "object"}\n'
        "async def execute(a, b, c):\n    return ''\n",
    )
    registry = create_registry(settings)
    assert registry.user_names == ("shout",)
    errors = {Path(e.path): e.error for e in registry.load_errors}
    assert errors[broken].startswith("SyntaxError:") and "(line 2)" in errors[broken]
    assert errors[raises] == "RuntimeError: import-time failure"
    assert "defines no tool" in errors[empty]
    assert 'parameters must have "type": "object"' in errors[bad_schema]
    assert "execute must take (params) or (params, ctx)" in errors[bad_arity]


def test_underscore_files_are_ignored(tools_dir: Path, settings: ToolSettings) -> None:
    write(tools_dir, "_helpers.py", "raise RuntimeError('never imported')\n")
    registry = create_registry(settings)
    assert registry.user_names == ()
    assert registry.load_errors == ()


def test_a_user_tool_cannot_shadow_a_builtin_or_another_user_tool(
    tools_dir: Path, settings: ToolSettings
) -> None:
    write(tools_dir, "a_shout.py", MODULE_TOOL)
    write(tools_dir, "b_shout.py", MODULE_TOOL)
    write(tools_dir, "term.py", MODULE_TOOL.replace('"shout"', '"terminal"'))
    registry = create_registry(settings)
    assert registry.user_names == ("shout",)
    messages = sorted(e.error for e in registry.load_errors)
    assert messages == [
        "tool name 'shout' is already used by another user tool",
        "tool name 'terminal' is already used by a built-in tool",
    ]
    assert registry.get("terminal").__class__.__name__ == "TerminalTool"  # type: ignore[union-attr]


def test_enabled_json_names_tools_for_every_profile(
    tools_dir: Path, settings: ToolSettings
) -> None:
    write(tools_dir, "shout.py", MODULE_TOOL)
    write(tools_dir, "reverse.py", CLASS_TOOL)
    (tools_dir / "enabled.json").write_text(json.dumps(["shout", "ghost"]))
    registry = create_registry(settings)
    assert registry.enabled_everywhere == ("shout",)
    assert registry.names_for_profile(["web_search", "todo", "nope"]) == [
        "web_search",
        "todo",
        "shout",
    ]


def test_a_bad_enabled_json_is_reported(tools_dir: Path, settings: ToolSettings) -> None:
    (tools_dir / "enabled.json").write_text("{not json")
    registry = create_registry(settings)
    assert registry.enabled_everywhere == ()
    assert "cannot read enabled.json" in registry.load_errors[0].error
    (tools_dir / "enabled.json").write_text("[1, 2]")
    registry.reload()
    assert "must be a JSON list of tool names" in registry.load_errors[0].error


async def test_reload_picks_up_new_changed_and_removed_files(
    tools_dir: Path, settings: ToolSettings, ctx: ToolContext
) -> None:
    registry = create_registry(settings)
    assert registry.reload_if_changed() is None
    path = write(tools_dir, "shout.py", MODULE_TOOL)
    report = registry.reload_if_changed()
    assert report is not None and report.loaded == ("shout",)
    assert (await registry.execute("shout", {"text": "a"}, ctx)).output == "A"

    write(tools_dir, "shout.py", MODULE_TOOL.replace(".upper()", ".upper() + '!'"))
    os.utime(path, ns=(1, 1))  # a different mtime even on a coarse clock
    assert registry.reload_if_changed() is not None
    assert (await registry.execute("shout", {"text": "a"}, ctx)).output == "A!"

    path.unlink()
    registry.reload()
    assert registry.get("shout") is None
    assert "web_search" in registry.names()  # built-ins survive every reload


def test_shipped_user_tools_folder_loads_cleanly() -> None:
    root = Path(__file__).resolve().parents[2]
    registry = create_registry(ToolSettings(tools_dir=str(root / "user_tools")))
    assert registry.load_errors == ()
    assert set(registry.enabled_everywhere) == {"get_current_datetime", "user_notes"}


def test_registry_without_tools_dir(tmp_path: Path) -> None:
    registry = ToolRegistry(ToolSettings(tools_dir=str(tmp_path / "missing")))
    report = registry.reload()
    assert report.loaded == () and report.errors == ()


async def test_watch_reloads_on_change(tools_dir: Path, settings: ToolSettings) -> None:
    registry = create_registry(settings)
    async with anyio.create_task_group() as tg:
        tg.start_soon(registry.watch, 0.02)
        write(tools_dir, "shout.py", MODULE_TOOL)
        for _ in range(250):
            if registry.get("shout") is not None:
                break
            await anyio.sleep(0.02)
        tg.cancel_scope.cancel()
    assert registry.get("shout") is not None


async def test_a_blocking_sync_tool_times_out_and_the_run_goes_on(
    tools_dir: Path, settings: ToolSettings, ctx: ToolContext
) -> None:
    write(
        tools_dir,
        "sleepy.py",
        'import time\nname = "sleepy"\ndescription = "d"\n'
        'parameters = {"type": "object", "properties": {}}\ntimeout_s = 0.2\n'
        "def execute(params):\n    time.sleep(1)\n    return 'late'\n",
    )
    registry = create_registry(settings)
    result = await registry.execute("sleepy", {}, ctx)
    assert result.failure_reason == "timeout"
    assert (await registry.execute("list_tools", {}, ctx)).success


@pytest.mark.skipif(not sandbox_status().available, reason="no bubblewrap sandbox here")
def test_module_code_runs_only_in_the_sandbox_where_nothing_is_writable(
    tools_dir: Path, settings: ToolSettings, tmp_path: Path
) -> None:
    marker = tmp_path / "ran-in-the-server"
    sneaky = write(tools_dir, "sneaky.py", f"open({str(marker)!r}, 'w').write('x')\n" + MODULE_TOOL)
    registry = create_registry(settings)
    assert registry.user_names == ()
    assert not marker.exists()
    [error] = registry.load_errors
    assert error.path == str(sneaky)
    # Nothing is writable where the loader runs: the import failed there (the server
    # never imports a user tool).
    assert "Read-only file system" in error.error


def test_a_relative_tools_folder_is_checked_and_loaded(
    tools_dir: Path, settings: ToolSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tools_dir, "shout.py", MODULE_TOOL)
    monkeypatch.chdir(tools_dir.parent)
    registry = create_registry(msgspec.structs.replace(settings, tools_dir=tools_dir.name))
    assert registry.user_names == ("shout",)
    assert registry.load_errors == ()
