"""The session's files folder exists whenever a tool that uses it is called, and is not
made for tools that never touch it."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import FakeToolCall, RecordedRequest, Reply
from tests.support.navi_app import navi_settings, open_navi
from tools import create_registry

pytestmark = pytest.mark.anyio

READ_TODO = FakeToolCall(name="todo", arguments={"action": "read"})
LIST = FakeToolCall(name="filesystem", arguments={"action": "list", "path": "."})


def write(name: str) -> FakeToolCall:
    return FakeToolCall(
        name="filesystem", arguments={"action": "write", "path": name, "content": "hello"}
    )


async def test_a_tool_that_uses_files_always_finds_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "unset"
    replies = iter(
        [
            Reply(tool_calls=[READ_TODO]),
            Reply(tool_calls=[write("a.txt")]),
            Reply(tool_calls=[LIST]),
            Reply(text="Done."),
        ]
    )
    calls = 0

    def respond(request: RecordedRequest) -> Reply:
        nonlocal calls
        calls += 1
        if calls == 3:  # after the write, before the list: the folder goes
            assert (folder / "a.txt").exists()
            shutil.rmtree(folder)
        return next(replies)

    async with FakeLLM(responder=respond) as fake:
        settings = navi_settings(tmp_path, fake.url, planning="off")
        async with open_navi(settings, llm=fake) as navi:
            session = await navi.create_session("secretary")
            folder = navi.files_dir(session)
            with anyio.fail_after(20):
                await navi.run(session, "Write a file, then list them.")
            records = await navi.store.read(session)
    assert [r.type for r in records if r.type.startswith("tool.c")] == ["tool.completed"] * 3
    assert calls == 4
    # Listed in a folder made again after it went (empty, not missing).
    assert folder.is_dir()
    assert not (folder / "a.txt").exists()


async def test_a_tool_that_never_touches_files_does_not_make_the_folder(tmp_path: Path) -> None:
    replies = [Reply(tool_calls=[READ_TODO]), Reply(text="Nothing to do.")]
    async with FakeLLM(replies) as fake:
        settings = navi_settings(tmp_path, fake.url, planning="off")
        async with open_navi(settings, llm=fake) as navi:
            session = await navi.create_session("secretary")
            with anyio.fail_after(20):
                await navi.run(session, "Read the todo list.")
            records = await navi.store.read(session)
            folder = navi.files_dir(session)
    assert "tool.completed" in [r.type for r in records]
    assert not folder.exists()


@pytest.mark.slow  # user tools and code_exec run in bubblewrap
def test_builtin_tools_that_use_the_files_folder_say_so() -> None:
    registry = create_registry()
    uses = {name for name in registry.names() if registry.get(name).uses_files}  # type: ignore[union-attr]
    assert {"filesystem", "image_view", "code_exec", "terminal"} <= uses
    assert not {"todo", "scratchpad", "web_search"} & uses
