from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import ToolContext, ToolRegistry, ToolSettings

pytestmark = pytest.mark.anyio

GOOD = """
name = "add_numbers"
description = "Adds two numbers."
parameters = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}

async def execute(params: dict) -> str:
    return str(params["a"] + params["b"])
"""


def listing(folder: Path) -> list[Path]:
    return list(folder.iterdir())


def write_manual(folder: Path, name: str, text: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.md").write_text(text)


@pytest.mark.slow  # user tools are checked in bubblewrap
async def test_write_tool_round_trip(
    registry: ToolRegistry, ctx: ToolContext, tools_dir: Path
) -> None:
    result = await registry.execute("write_tool", {"name": "add_numbers", "code": GOOD}, ctx)
    assert result.success, result.output
    assert (tools_dir / "add_numbers.py").read_text() == GOOD
    assert json.loads((tools_dir / "enabled.json").read_text()) == ["add_numbers"]
    assert "add_numbers" in registry.enabled_everywhere
    added = await registry.execute("add_numbers", {"a": 2, "b": 3}, ctx)
    assert added.output == "5"

    again = await registry.execute("write_tool", {"name": "add_numbers", "code": GOOD}, ctx)
    assert "exists already; pass overwrite=true" in (again.error or "")
    changed = GOOD.replace('params["a"] + params["b"]', 'params["a"] * params["b"]')
    replaced = await registry.execute(
        "write_tool", {"name": "add_numbers", "code": changed, "overwrite": True}, ctx
    )
    assert replaced.success
    assert (await registry.execute("add_numbers", {"a": 2, "b": 3}, ctx)).output == "6"
    assert json.loads((tools_dir / "enabled.json").read_text()) == ["add_numbers"]


@pytest.mark.slow  # user tools are checked in bubblewrap
@pytest.mark.parametrize(
    ("name", "code", "message"),
    [
        ("broken", "def execute(:\n", "the tool was rejected: SyntaxError"),
        ("raising", "raise ImportError('nope')\n", "the tool was rejected: ImportError: nope"),
        ("nothing", "x = 1\n", "the tool was rejected: defines no tool"),
        ("other", GOOD, "defines tool(s) ['add_numbers'], but the name given is 'other'"),
        ("terminal", GOOD, "'terminal' is a built-in tool"),
        ("Bad-Name", GOOD, "invalid tool name 'Bad-Name'"),
        ("../escape", GOOD, "invalid tool name '../escape'"),
    ],
)
async def test_write_tool_rejects_a_broken_tool_and_writes_nothing(
    registry: ToolRegistry,
    ctx: ToolContext,
    tools_dir: Path,
    name: str,
    code: str,
    message: str,
) -> None:
    result = await registry.execute("write_tool", {"name": name, "code": code}, ctx)
    assert not result.success
    assert message in (result.error or ""), result.error
    assert listing(tools_dir) == []
    assert registry.user_names == ()


@pytest.mark.slow  # user tools are checked in bubblewrap
async def test_reload_tools_reports_loaded_and_failed(
    registry: ToolRegistry, ctx: ToolContext, tools_dir: Path
) -> None:
    (tools_dir / "add_numbers.py").write_text(GOOD)
    (tools_dir / "broken.py").write_text("def (\n")
    result = await registry.execute("reload_tools", {}, ctx)
    assert result.success
    assert "Loaded 1 user tool(s): add_numbers." in result.output
    assert f"Failed to load {tools_dir / 'broken.py'}: SyntaxError" in result.output


@pytest.mark.slow  # user tools are checked in bubblewrap
async def test_list_tools_shows_builtins_user_tools_and_errors(
    registry: ToolRegistry, ctx: ToolContext, tools_dir: Path
) -> None:
    (tools_dir / "add_numbers.py").write_text(GOOD)
    (tools_dir / "broken.py").write_text("def (\n")
    registry.reload()
    output = (await registry.execute("list_tools", {}, ctx)).output
    assert "- terminal: Run one command" in output
    assert "User tools:\n- add_numbers: Adds two numbers." in output
    assert "broken.py: SyntaxError" in output


async def test_tool_manual_prefers_the_written_manual(
    registry: ToolRegistry, ctx: ToolContext, settings: ToolSettings
) -> None:
    write_manual(Path(settings.manuals_dir), "todo", "# todo\nHand-written guide.\n")
    written = await registry.execute("tool_manual", {"name": "todo"}, ctx)
    assert written.output == "# todo\nHand-written guide.\n"
    generated = await registry.execute("tool_manual", {"name": "scratchpad"}, ctx)
    assert generated.output.startswith("# scratchpad\n")
    assert "- `action` (string, required): One of: write, append, read, clear." in generated.output
    assert "- `section` (string, optional): Section name" in generated.output
    unknown = await registry.execute("tool_manual", {"name": "ghost"}, ctx)
    assert "unknown tool 'ghost'. Available tools:" in (unknown.error or "")


def test_shipped_manuals_name_real_tools(registry: ToolRegistry) -> None:
    root = Path(__file__).resolve().parents[2] / "manuals"
    for manual in root.glob("*.md"):
        assert registry.get(manual.stem) is not None, manual
