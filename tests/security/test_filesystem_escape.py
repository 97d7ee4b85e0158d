"""The filesystem tool cannot leave the session's folder (issue 19, item 6), as an
attacker tries it: a scripted LLM calls ``filesystem`` against a real ``navi serve``
while files planted in the session's folder (a hard link, a folder swapped for a
symlink in a loop) try to lead it out.

Before the change a write through a planted hard link changed the file outside, and
the check-then-open let reads escape while a folder was swapped for a symlink.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.security.conftest import CANARY_FILE_TEXT, NaviServerProcess
from tests.support.fake_llm_script import FakeToolCall, Reply
from tools import InMemoryToolState, ToolContext, ToolSettings, create_registry

INSIDE_TEXT = "the session's own notes"
READS = 200


def session_folder(server: NaviServerProcess, session: str) -> Path:
    folder = server.root / "files" / session
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def fs(**arguments: object) -> FakeToolCall:
    return FakeToolCall(name="filesystem", arguments=dict(arguments))


def run_turn(server: NaviServerProcess, session: str, *steps: list[FakeToolCall]) -> list[str]:
    """One turn in which the LLM makes each step's calls, then answers; the tool results."""
    server.llm.script(*(Reply(tool_calls=calls) for calls in steps), Reply(text="done"))
    response = server.send(session, "tidy up my files")
    assert response.status_code == 200, response.text
    return [m["content"] for m in server.tool_messages(session)]


class FolderSwapper(threading.Thread):
    """Swaps ``folder/docs`` for a symlink to ``outside`` and back, as fast as it can."""

    def __init__(self, folder: Path, outside: Path) -> None:
        super().__init__(daemon=True)
        self.docs = folder / "docs"
        self.parked = folder / "docs.real"
        self.outside = outside
        self.done = threading.Event()
        self.swaps = 0
        self.docs.mkdir()
        (self.docs / "canary.txt").write_text(INSIDE_TEXT)

    def run(self) -> None:
        while not self.done.is_set():
            os.rename(self.docs, self.parked)
            os.symlink(self.outside, self.docs)
            time.sleep(0)  # let the other thread run: in each state, not only one
            os.unlink(self.docs)
            os.rename(self.parked, self.docs)
            self.swaps += 1
            time.sleep(0)


@contextmanager
def swapping(folder: Path, outside: Path) -> Iterator[FolderSwapper]:
    swapper = FolderSwapper(folder, outside)
    swapper.start()
    try:
        yield swapper
    finally:
        swapper.done.set()
        swapper.join(10)


# ---------------------------------------------------------------- through navi serve


def test_a_planted_hard_link_is_not_written_through(shared_navi: NaviServerProcess) -> None:
    server = shared_navi
    session = server.create_session()
    folder = session_folder(server, session)
    os.link(server.canary_file, folder / "notes.txt")
    results = run_turn(
        server,
        session,
        [
            fs(action="write", path="notes.txt", content="pwned"),
            fs(action="write", path="notes.txt", content="pwned", append=True),
            fs(action="read", path="notes.txt"),
        ],
    )
    assert len(results) == 3
    for result in results:
        assert "has 2 hard links" in result, result
    assert server.canary_file.read_text() == CANARY_FILE_TEXT
    assert server.leaked("\n".join(results)) == []
    # Deleting the planted name is fine: it removes that name only.
    results = run_turn(server, session, [fs(action="delete", path="notes.txt")])
    assert results[-1] == "Deleted notes.txt"
    assert server.canary_file.read_text() == CANARY_FILE_TEXT


def test_a_folder_swapped_for_a_symlink_never_lets_a_read_out(
    shared_navi: NaviServerProcess,
) -> None:
    server = shared_navi
    session = server.create_session()
    folder = session_folder(server, session)
    steps = [[fs(action="read", path="docs/canary.txt")] * 50 for _ in range(READS // 50)]
    with swapping(folder, server.canary_file.parent) as swapper:
        results = run_turn(server, session, *steps)
    assert len(results) == READS
    escapes = [r for r in results if CANARY_FILE_TEXT in r]
    assert escapes == []
    # Each read found the real folder, a link it refused, or nothing in between.
    for result in results:
        assert result == INSIDE_TEXT or result.startswith("Error:"), result
    # The folder really was swapped while the reads ran: they saw both of its states.
    # (Not a count of swaps: on a loaded machine the swapping thread may be starved.)
    assert swapper.swaps > 0
    assert INSIDE_TEXT in results and any(r.startswith("Error:") for r in results)


def test_what_held_still_holds(shared_navi: NaviServerProcess) -> None:
    server = shared_navi
    session = server.create_session()
    folder = session_folder(server, session)
    outside = server.canary_file.parent
    (folder / "link.txt").symlink_to(server.canary_file)
    (folder / "linkdir").symlink_to(outside, target_is_directory=True)
    attempts = [
        fs(action="read", path="../../outside/canary.txt"),
        fs(action="read", path=str(server.canary_file)),
        fs(action="read", path="~/.ssh/id_ed25519"),
        fs(action="read", path="%2e%2e/%2e%2e/outside/canary.txt"),
        fs(action="read", path="link.txt"),
        fs(action="write", path="link.txt", content="pwned"),
        fs(action="read", path="linkdir/canary.txt"),
        fs(action="list", path="linkdir"),
        fs(action="write", path="linkdir/new.txt", content="pwned"),
        fs(action="mkdir", path="linkdir/sub"),
        fs(action="delete", path="linkdir", recursive=True),
        fs(action="delete", path="..", recursive=True),
    ]
    results = run_turn(server, session, attempts)
    assert len(results) == len(attempts)
    for call, result in zip(attempts, results, strict=True):
        assert result.startswith("Error:"), (call.arguments, result)
        assert "access denied" in result or "percent-encoded" in result, result
    assert server.leaked("\n".join(results)) == []
    assert server.canary_file.read_text() == CANARY_FILE_TEXT
    assert sorted(p.name for p in outside.iterdir()) == ["canary.txt"]
    assert (folder / "link.txt").is_symlink() and (folder / "linkdir").is_symlink()


# ---------------------------------------------------------------- both ways of opening


@pytest.mark.anyio
@pytest.mark.parametrize("way", ["openat2", "walk"])
async def test_the_race_in_process_both_ways(
    tmp_path: Path, way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same race on the kernel's ``openat2`` and on the ``O_NOFOLLOW`` walk that
    replaces it where the kernel lacks it, for reads and listings. (Writes open the
    same way; a write in the moment the folder is parked would make a new one inside,
    which is allowed and would stop the swapping.)"""
    from tools import beneath

    if way == "walk":
        monkeypatch.setattr(beneath, "_openat2", None)
    elif not beneath.has_openat2():
        pytest.skip("this kernel has no openat2")
    folder = tmp_path / "files" / "s1"
    folder.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text(CANARY_FILE_TEXT)
    registry = create_registry(ToolSettings(tools_dir=str(tmp_path / "tools")))
    ctx = ToolContext.standalone("s1", folder, state=InMemoryToolState())
    outputs = []
    with swapping(folder, outside) as swapper:
        for index in range(READS):
            read = await registry.execute(
                "filesystem", {"action": "read", "path": "docs/canary.txt"}, ctx
            )
            outputs.append(read.output)
            if index % 4 == 0:
                listing = await registry.execute(
                    "filesystem", {"action": "list", "path": "docs"}, ctx
                )
                outputs.append(listing.output)
    assert swapper.swaps > 0
    assert [o for o in outputs if CANARY_FILE_TEXT in o] == []
    assert any(o == INSIDE_TEXT for o in outputs)
