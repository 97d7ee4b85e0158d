"""todo, scratchpad and user_notes keep their state as events, never in the tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from events.types import NoteDeleted, NoteSaved, ScratchpadUpdated, TodoItem, TodoUpdated
from tools import InMemoryToolState, ProfileInfo, ToolContext, ToolRegistry, ToolSettings

pytestmark = pytest.mark.anyio


def context(
    files_dir: Path, settings: ToolSettings, state: InMemoryToolState, **profile: object
) -> ToolContext:
    return ToolContext.standalone(
        "s1",
        files_dir,
        settings=settings,
        state=state,
        profile=ProfileInfo(**profile),  # type: ignore[arg-type]
    )


# ---------------------------------------------------------------- todo


async def test_todo_set_update_read_as_events(
    registry: ToolRegistry, ctx: ToolContext, state: InMemoryToolState
) -> None:
    result = await registry.execute(
        "todo",
        {
            "action": "set",
            "items": [{"text": "Find flights"}, {"text": "Book", "executor": "TOOL: http_request"}],
        },
        ctx,
    )
    assert result.output == (
        "Todo (0/2 done):\n[ ] 1. Find flights\n[ ] 2. Book  (TOOL: http_request)"
    )
    await registry.execute("todo", {"action": "update", "id": 1, "status": "in_progress"}, ctx)
    done = await registry.execute(
        "todo", {"action": "update", "id": 1, "status": "done", "note": "3 options"}, ctx
    )
    assert done.output == (
        "Todo (1/2 done):\n[x] 1. Find flights\n      note: 3 options\n"
        "[ ] 2. Book  (TOOL: http_request)"
    )
    book = TodoItem(id=2, text="Book", executor="TOOL: http_request")
    assert state.events == [
        TodoUpdated(items=(TodoItem(id=1, text="Find flights"), book)),
        TodoUpdated(items=(TodoItem(id=1, text="Find flights", status="in_progress"), book)),
        TodoUpdated(
            items=(TodoItem(id=1, text="Find flights", status="done", note="3 options"), book)
        ),
    ]
    read = await registry.execute("todo", {"action": "read"}, ctx)
    assert read.output == done.output
    assert len(state.events) == 3  # reading records nothing


async def test_todo_state_comes_from_the_log(
    registry: ToolRegistry, files_dir: Path, settings: ToolSettings
) -> None:
    # Resume: a state folded from recorded events is what the tool sees.
    log = [TodoUpdated(items=(TodoItem(id=1, text="Restored step"),))]
    restored = context(files_dir, settings, InMemoryToolState.from_events(log))
    read = await registry.execute("todo", {"action": "read"}, restored)
    assert read.output == "Todo (0/1 done):\n[ ] 1. Restored step"


async def test_todo_errors(
    registry: ToolRegistry, ctx: ToolContext, state: InMemoryToolState
) -> None:
    empty = await registry.execute("todo", {"action": "read"}, ctx)
    assert empty.output == "The todo list is empty."
    no_items = await registry.execute("todo", {"action": "set"}, ctx)
    assert "needs 'items'" in (no_items.error or "")
    no_step = await registry.execute("todo", {"action": "update", "id": 3, "status": "done"}, ctx)
    assert no_step.error == "no step 3; steps are: none (the list is empty; use set)"
    await registry.execute("todo", {"action": "set", "items": [{"text": "a"}]}, ctx)
    nothing = await registry.execute("todo", {"action": "update", "id": 1}, ctx)
    assert "at least one of 'status', 'validation', 'note'" in (nothing.error or "")
    bad_status = await registry.execute("todo", {"action": "update", "id": 1, "status": "won"}, ctx)
    assert "is not one of" in (bad_status.error or "")
    assert len(state.events) == 1


async def test_step_validation_blocks_done_without_validation(
    registry: ToolRegistry, files_dir: Path, settings: ToolSettings, state: InMemoryToolState
) -> None:
    ctx = context(files_dir, settings, state, step_validation_enabled=True)
    await registry.execute("todo", {"action": "set", "items": [{"text": "Deploy"}]}, ctx)
    refused = await registry.execute("todo", {"action": "update", "id": 1, "status": "done"}, ctx)
    assert not refused.success
    assert "cannot be marked done without 'validation'" in (refused.error or "")
    assert state.todo()[0].status == "pending"
    accepted = await registry.execute(
        "todo",
        {"action": "update", "id": 1, "status": "done", "validation": "curl /health -> 200"},
        ctx,
    )
    assert accepted.success
    assert "validation: curl /health -> 200" in accepted.output
    assert state.todo()[0].status == "done"


# ---------------------------------------------------------------- scratchpad


async def test_scratchpad_sections_as_events(
    registry: ToolRegistry, files_dir: Path, settings: ToolSettings, state: InMemoryToolState
) -> None:
    ctx = context(files_dir, settings, state, id="server_admin")
    empty = await registry.execute("scratchpad", {"action": "read"}, ctx)
    assert (
        empty.output
        == "## status\n(empty)\n\n## logs\n(empty)\n\n## errors\n(empty)\n\n## plan\n(empty)"
    )
    await registry.execute(
        "scratchpad", {"action": "write", "section": "status", "content": "web1 up"}, ctx
    )
    await registry.execute(
        "scratchpad", {"action": "append", "section": "status", "content": "db1 down"}, ctx
    )
    await registry.execute(
        "scratchpad", {"action": "write", "section": "extra", "content": "misc"}, ctx
    )
    one = await registry.execute("scratchpad", {"action": "read", "section": "status"}, ctx)
    assert one.output == "## status\nweb1 up\ndb1 down"
    everything = await registry.execute("scratchpad", {"action": "read"}, ctx)
    assert everything.output.endswith("## plan\n(empty)\n\n## extra\nmisc")
    await registry.execute("scratchpad", {"action": "clear", "section": "extra"}, ctx)
    assert state.scratchpad() == {"status": "web1 up\ndb1 down"}
    await registry.execute("scratchpad", {"action": "clear"}, ctx)
    assert state.scratchpad() == {}
    assert state.events == [
        ScratchpadUpdated(section="status", content="web1 up"),
        ScratchpadUpdated(section="status", content="web1 up\ndb1 down"),
        ScratchpadUpdated(section="extra", content="misc"),
        ScratchpadUpdated(section="extra", content=None),
        ScratchpadUpdated(section="status", content=None),
    ]


@pytest.mark.parametrize(
    ("profile_id", "sections"),
    [
        ("secretary", ["findings", "sources", "drafts"]),
        ("smart_home", ["state", "config", "errors"]),
        ("other", ["notes"]),
    ],
)
async def test_default_sections_per_profile(
    registry: ToolRegistry,
    files_dir: Path,
    settings: ToolSettings,
    state: InMemoryToolState,
    profile_id: str,
    sections: list[str],
) -> None:
    ctx = context(files_dir, settings, state, id=profile_id)
    output = (await registry.execute("scratchpad", {"action": "read"}, ctx)).output
    assert [line[3:] for line in output.splitlines() if line.startswith("## ")] == sections
    custom = context(files_dir, settings, state, id="secretary", scratchpad_sections=("a", "b"))
    output = (await registry.execute("scratchpad", {"action": "read"}, custom)).output
    assert output == "## a\n(empty)\n\n## b\n(empty)"


async def test_scratchpad_errors(
    registry: ToolRegistry, ctx: ToolContext, state: InMemoryToolState
) -> None:
    no_section = await registry.execute("scratchpad", {"action": "write", "content": "x"}, ctx)
    assert "needs a 'section' (suggested: notes)" in (no_section.error or "")
    no_content = await registry.execute("scratchpad", {"action": "write", "section": "a"}, ctx)
    assert "needs 'content'" in (no_content.error or "")
    bad_name = await registry.execute(
        "scratchpad", {"action": "write", "section": "a b", "content": "x"}, ctx
    )
    assert "invalid section name 'a b'" in (bad_name.error or "")
    huge = await registry.execute(
        "scratchpad", {"action": "write", "section": "a", "content": "x" * 30_000}, ctx
    )
    assert "over the limit of 20000" in (huge.error or "")
    assert state.events == []


async def test_a_subagent_scratchpad_is_separate(
    registry: ToolRegistry, files_dir: Path, settings: ToolSettings
) -> None:
    parent_state, child_state = InMemoryToolState(), InMemoryToolState()
    parent = context(files_dir, settings, parent_state)
    child = context(files_dir, settings, child_state)
    await registry.execute(
        "scratchpad", {"action": "write", "section": "notes", "content": "P"}, parent
    )
    await registry.execute(
        "scratchpad", {"action": "write", "section": "notes", "content": "C"}, child
    )
    assert parent_state.scratchpad() == {"notes": "P"}
    assert child_state.scratchpad() == {"notes": "C"}


# ---------------------------------------------------------------- shipped user tools


@pytest.fixture
def shipped(settings: ToolSettings) -> ToolRegistry:
    from tools import create_registry

    root = Path(__file__).resolve().parents[2]
    import msgspec

    return create_registry(msgspec.structs.replace(settings, tools_dir=str(root / "user_tools")))


@pytest.mark.slow  # the shipped user tools load in bubblewrap
async def test_user_notes_persist_as_events(
    shipped: ToolRegistry, ctx: ToolContext, state: InMemoryToolState
) -> None:
    saved = await shipped.execute("user_notes", {"action": "save", "text": "Buy oat milk"}, ctx)
    assert saved.success and saved.output.startswith("Saved note [")
    note_id = saved.output.split("[")[1].split("]")[0]
    await shipped.execute("user_notes", {"action": "save", "text": "Call Bob", "id": "bob"}, ctx)
    listed = await shipped.execute("user_notes", {"action": "list"}, ctx)
    assert listed.output == f"- [{note_id}] Buy oat milk\n- [bob] Call Bob"
    found = await shipped.execute("user_notes", {"action": "search", "query": "OAT"}, ctx)
    assert found.output == f"- [{note_id}] Buy oat milk"
    await shipped.execute(
        "user_notes", {"action": "save", "text": "Call Bob at 5", "id": "bob"}, ctx
    )
    deleted = await shipped.execute("user_notes", {"action": "delete", "id": note_id}, ctx)
    assert deleted.output == f"Deleted note [{note_id}]."
    assert state.events == [
        NoteSaved(note_id=note_id, text="Buy oat milk"),
        NoteSaved(note_id="bob", text="Call Bob"),
        NoteSaved(note_id="bob", text="Call Bob at 5"),
        NoteDeleted(note_id=note_id),
    ]
    # Replay: the notes come back from the events alone.
    assert InMemoryToolState.from_events(state.events).notes() == {"bob": "Call Bob at 5"}
    missing = await shipped.execute("user_notes", {"action": "delete", "id": "nope"}, ctx)
    assert missing.error == "ValueError: no note [nope]; existing ids: bob"
    empty = await shipped.execute("user_notes", {"action": "save", "text": "  "}, ctx)
    assert "needs a non-empty 'text'" in (empty.error or "")


@pytest.mark.slow  # the shipped user tools load in bubblewrap
async def test_get_current_datetime(shipped: ToolRegistry, ctx: ToolContext) -> None:
    utc = await shipped.execute("get_current_datetime", {"timezone": "UTC"}, ctx)
    assert utc.success and "(UTC); ISO 8601: " in utc.output and utc.output.endswith("+00:00")
    local = await shipped.execute("get_current_datetime", {}, ctx)
    assert local.success and "ISO 8601:" in local.output
    bad = await shipped.execute("get_current_datetime", {"timezone": "Mars/Olympus"}, ctx)
    assert bad.error == "ValueError: unknown timezone 'Mars/Olympus'; use an IANA name like 'UTC'"
    assert shipped.is_idempotent("get_current_datetime", {})
