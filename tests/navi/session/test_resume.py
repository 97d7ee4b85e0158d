"""Resume after a crash: cut a recorded multi-tool run after every event, restart Navi
on the cut log, and check that the run finishes with no completed call run twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from events.envelope import NewEvent, Recorded
from events.factory import store_for_url
from events.types import (
    TERMINAL_RUN_EVENTS,
    ToolCompleted,
    ToolFailed,
    ToolRequested,
    ToolStarted,
)
from projections.context import CONTEXT
from projections.fold import fold
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import FakeToolCall, Reply
from tests.support.navi_app import navi_settings, open_navi, run_stream
from tests.support.well_formed import assert_well_formed
from tools.sandbox import sandbox_status

pytestmark = [
    pytest.mark.anyio,
    # The user tools these runs call each run in the sandbox.
    pytest.mark.skipif(not sandbox_status().available, reason="no bubblewrap sandbox here"),
]

MARK = """
name = "mark"
description = "Record a mark (not idempotent)."
parameters = {"type": "object", "properties": {"token": {"type": "string"}}, "required": ["token"]}
idempotent = False

async def execute(params):
    import os
    # The session's files folder: the only folder a user tool's sandbox may write.
    with open(os.environ["NAVI_FILES_DIR"] + "/marks.log", "a") as f:
        f.write(params["token"] + "\\n")
    return "marked " + params["token"]
"""

PEEK = """
name = "peek"
description = "Look at something (idempotent)."
parameters = {"type": "object", "properties": {"token": {"type": "string"}}, "required": ["token"]}
idempotent = True

async def execute(params):
    import os
    # The session's files folder: the only folder a user tool's sandbox may write.
    with open(os.environ["NAVI_FILES_DIR"] + "/peeks.log", "a") as f:
        f.write(params["token"] + "\\n")
    return "peeked " + params["token"]
"""

REPLIES = [
    Reply(
        thinking="plan",
        tool_calls=[
            FakeToolCall(name="mark", arguments={"token": "a"}),
            FakeToolCall(name="peek", arguments={"token": "b"}),
        ],
    ),
    Reply(text="now one more", tool_calls=[FakeToolCall(name="mark", arguments={"token": "c"})]),
    Reply(text="All done, marked a and c."),
]


def respond(request: Any) -> Reply:
    """The reply for where the conversation is, so a re-issued call gets the same one."""
    body = request.body if hasattr(request, "body") else request
    turns = sum(1 for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls"))
    return REPLIES[min(turns, len(REPLIES) - 1)]


def install_tools(root: Path) -> None:
    tools_dir = root / "user_tools"
    tools_dir.mkdir(parents=True, exist_ok=True)
    (tools_dir / "mark.py").write_text(MARK)
    (tools_dir / "peek.py").write_text(PEEK)
    (tools_dir / "enabled.json").write_text(json.dumps(["mark", "peek"]))


def effects_dir(root: Path, session: str) -> Path:
    """Where the tools write: the session's files folder (navi_settings: ``root/files``)."""
    folder = root / "files" / session
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


async def record_reference(tmp_path: Path, fake: FakeLLM) -> tuple[str, list[Recorded]]:
    settings = navi_settings(tmp_path, fake.url, planning="off")
    async with open_navi(settings, llm=fake) as navi:
        session = await navi.create_session("secretary")
        with anyio.fail_after(20):
            async for _ in run_stream(navi, session, "mark a, peek b, then mark c"):
                pass
        return session, await navi.store.read(session)


async def resume_from(
    root: Path, url: str, session: str, cut: list[Recorded], fake: FakeLLM
) -> list[Recorded]:
    effects = effects_dir(root, session)
    # The effects the cut log says happened, happened; a started one without its result
    # too (the worst case for a call in doubt). A call without tool.started never ran.
    requested: dict[str, ToolRequested] = {}
    for record in cut:
        event = record.event
        if isinstance(event, ToolRequested):
            requested[event.call_id] = event
        elif isinstance(event, ToolStarted):
            call = requested[event.call_id]
            target = {"mark": "marks.log", "peek": "peeks.log"}[call.name]
            with open(effects / target, "a") as f:
                f.write(call.arguments["token"] + "\n")
    store = store_for_url(url)
    async with store:
        if cut:
            await store.append(
                session,
                [NewEvent(event=r.event, run_id=r.run_id) for r in cut],
                expected_seq=0,
            )
    settings = navi_settings(root, fake.url, database_url=url, resume_on_start=True, planning="off")
    async with open_navi(settings, llm=fake) as navi:
        with anyio.fail_after(20):
            while True:
                records = await navi.store.read(session)
                if records and records[-1].type in TERMINAL_RUN_EVENTS:
                    return records
                await anyio.sleep(0.02)


def check_resumed(records: list[Recorded], root: Path, session: str, cut: list[Recorded]) -> None:
    results: dict[str, int] = {}
    for record in records:
        if isinstance(record.event, ToolCompleted | ToolFailed):
            results[record.event.call_id] = results.get(record.event.call_id, 0) + 1
    requested = [r.event for r in records if isinstance(r.event, ToolRequested)]
    assert all(results.get(call.call_id) == 1 for call in requested), results
    assert_well_formed(fold(CONTEXT, records).as_list())
    assert records[-1].type == "run.completed"
    marks = lines(effects_dir(root, session) / "marks.log")
    # A non-idempotent call never runs twice: each mark is there at most once.
    assert sorted(marks) == sorted(set(marks)), marks
    completed_in_cut = {r.event.call_id for r in cut if isinstance(r.event, ToolCompleted)}
    for record in records:
        event = record.event
        if isinstance(event, ToolFailed):
            assert event.reason == "interrupted", (event, [r.type for r in cut][-3:])
            assert event.call_id not in completed_in_cut
    # Idempotent calls are never lost: every peek that completed has its effect.
    peeks = lines(effects_dir(root, session) / "peeks.log")
    assert "b" in peeks


CHUNKS = ("llm.text", "llm.thinking")


def _another_chunk(reference: list[Recorded], cut_at: int) -> bool:
    """Whether the cut's last event is a chunk that follows one of the same kind: the
    run is then in the state it was in one chunk earlier (navi/run/state.py: a chunk
    keeps a streaming run streaming), so resuming from there again adds only time."""
    last, before = reference[cut_at - 1].type, reference[cut_at - 2].type
    return last in CHUNKS and last == before


async def test_resume_after_a_crash_at_every_event_boundary(tmp_path: Path) -> None:
    install_tools(tmp_path / "ref")
    async with FakeLLM(responder=respond) as fake:
        session, reference = await record_reference(tmp_path / "ref", fake)
        assert [r.type for r in reference].count("tool.completed") == 3
        start = next(i for i, r in enumerate(reference) if r.type == "run.started") + 1
        for cut_at in range(start, len(reference)):
            if _another_chunk(reference, cut_at):
                continue
            root = tmp_path / f"cut{cut_at}"
            install_tools(root)
            cut = reference[:cut_at]
            records = await resume_from(root, f"sqlite:///{root / 'navi.db'}", session, cut, fake)
            check_resumed(records, root, session, cut)


@pytest.mark.postgres
async def test_resume_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    from sqlalchemy import text

    install_tools(tmp_path / "ref")
    async with FakeLLM(responder=respond) as fake:
        session, reference = await record_reference(tmp_path / "ref", fake)
        kinds = [r.type for r in reference]
        cuts = [kinds.index("tool.requested") + 1, kinds.index("tool.started") + 1, len(kinds) - 1]
        for cut_at in cuts:
            async with (
                store_for_url(postgres_url) as store,
                store.engine.begin() as conn,  # type: ignore[attr-defined]
            ):
                await conn.execute(text("TRUNCATE navi_events, navi_idempotency"))
            root = tmp_path / f"pg{cut_at}"
            install_tools(root)
            cut = reference[:cut_at]
            records = await resume_from(root, postgres_url, session, cut, fake)
            check_resumed(records, root, session, cut)
