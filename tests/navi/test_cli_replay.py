"""``navi replay | inspect | events | export | import | verify`` on a database a real
server recorded (with the fake LLM), run through ``navi.cli.main``."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest

from navi.cli import main
from tests.support.fake_llm import FakeToolCall, Reply
from tests.support.navi_server import navi_server_for


@dataclass
class Recorded:
    db: str
    session_id: str
    root: Path


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """A session of two runs (a tool call, then a plain answer), the server stopped."""
    root = tmp_path_factory.mktemp("cli-replay")
    with navi_server_for(root) as server:
        server.fake_llm.script(
            Reply(
                tool_calls=[
                    FakeToolCall(
                        name="todo", arguments={"action": "set", "items": [{"text": "pack"}]}
                    )
                ]
            ),
            Reply(thinking="Short one.", text="Packed and ready."),
            Reply(text="Goodbye."),
        )
        with httpx.Client(base_url=server.url, timeout=30) as http:
            sid = http.post("/sessions", json={}).json()["session_id"]
            http.post(f"/sessions/{sid}/messages", json={"content": "get ready"})
            http.post(f"/sessions/{sid}/messages", json={"content": "bye"})
        db = server.settings.database_url
    yield Recorded(db=db, session_id=sid, root=root)


@pytest.fixture(autouse=True)
def logging_as_it_was() -> Iterator[None]:
    """``main`` configures logging for the process: put it back for the next tests."""
    import logging

    import structlog

    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.configure(**config)
    root.handlers[:] = handlers
    root.setLevel(level)


def navi(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_events_text_json_and_filters(
    recorded: Recorded, capsys: pytest.CaptureFixture[str]
) -> None:
    sid, db = recorded.session_id, recorded.db
    code, out, _ = navi(capsys, "events", sid, "--db", db)
    lines = out.splitlines()
    assert code == 0 and "session.created" in lines[0] and lines[0].split()[0] == "1"
    assert any("tool.completed" in line for line in lines)

    code, out, _ = navi(capsys, "events", sid, "--db", db, "--type", "tool", "--json")
    events = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and events and all(e["type"].startswith("tool.") for e in events)
    assert {"stream_id", "seq", "event_id", "timestamp", "type", "version", "payload"} <= set(
        events[0]
    )
    after = events[0]["seq"]
    code, out, _ = navi(capsys, "events", sid, "--db", db, "--after", str(after), "--type",
                        "run.completed,user.message")  # fmt: skip
    types = [line.split()[3] for line in out.splitlines()]
    assert code == 0 and types == ["run.completed", "user.message", "run.completed"]

    code, _, err = navi(capsys, "events", sid, "--db", db, "--type", "nope")
    assert code == 2 and "no event type matches 'nope'" in err
    code, _, err = navi(capsys, "events", "missing", "--db", db)
    assert code == 1 and "no session starts with 'missing'" in err


def test_inspect_at_a_seq(recorded: Recorded, capsys: pytest.CaptureFixture[str]) -> None:
    sid, db = recorded.session_id, recorded.db
    code, out, _ = navi(capsys, "events", sid, "--db", db, "--json", "--type", "llm.requested")
    second_call = [json.loads(line)["seq"] for line in out.splitlines()][1]

    code, out, _ = navi(capsys, "inspect", sid, "--db", db, "--at", str(second_call))
    assert code == 0
    assert f"right after seq {second_call}" in out and "(llm.requested)" in out
    assert "run state: awaiting_llm" in out
    assert "messages (what the user saw): 3" in out
    assert "context (what the LLM saw): 3 messages" in out
    assert "[pending] pack" in out
    assert "LLM requests: 2" in out and "tools [" in out
    assert "get ready" in out

    code, out, _ = navi(capsys, "inspect", sid, "--db", db, "--json")
    state = json.loads(out)
    assert code == 0 and state["seq"] == state["head"] and state["run_state"] == "done"
    assert state["messages"][-1]["content"] == "Goodbye."

    code, _, err = navi(capsys, "inspect", sid, "--db", db, "--at", "100000")
    assert code == 1 and "has events 1.." in err

    # The exact request of any LLM call, also one of an earlier run.
    code, out, _ = navi(capsys, "events", sid, "--db", db, "--json", "--type", "llm.requested")
    first_call = json.loads(out.splitlines()[0])["seq"]
    code, out, _ = navi(capsys, "inspect", sid, "--db", db)
    assert f"--request {first_call}" in out  # the last run's calls come with their messages
    code, out, _ = navi(capsys, "inspect", sid, "--db", db, "--request", str(first_call))
    assert code == 0 and f"LLM call at seq {first_call}" in out and "tools: " in out
    assert "messages (1, after the system prompt):" in out and "user: get ready" in out
    code, out, _ = navi(capsys, "inspect", sid, "--db", db, "--request", str(first_call), "--json")
    assert json.loads(out)["messages"][0]["content"] == "get ready"
    code, _, err = navi(capsys, "inspect", sid, "--db", db, "--request", "1")
    assert code == 2 and "not an llm.requested" in err


def test_replay_prints_a_run_like_chat(
    recorded: Recorded, capsys: pytest.CaptureFixture[str]
) -> None:
    sid, db = recorded.session_id, recorded.db
    code, out, err = navi(capsys, "replay", sid, "--db", db, "--run", "1", "--speed", "max")
    assert code == 0 and "replaying run 1 of 2" in err
    assert out.startswith("> get ready\n")
    assert "⚙ todo" in out and "✓" in out and "Short one." in out
    assert out.rstrip().endswith("Packed and ready.")

    code, out, _ = navi(capsys, "replay", sid, "--db", db, "--speed", "50")
    assert code == 0 and out == "> bye\nGoodbye.\n"  # the last run by default

    code, _, err = navi(capsys, "replay", sid, "--db", db, "--run", "3")
    assert code == 2 and "has runs 1..2, not 3" in err
    code, _, err = navi(capsys, "replay", sid, "--db", db, "--speed", "0")
    assert code == 2 and "speed must be above 0" in err


def test_export_import_and_verify(
    recorded: Recorded, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sid = recorded.session_id
    db = f"sqlite:///{tmp_path / 'copy.db'}"
    exported = tmp_path / "session.jsonl"
    code, out, _ = navi(capsys, "export", sid, "--db", recorded.db)
    assert code == 0 and json.loads(out.splitlines()[0])["session_id"] == sid
    assert navi(capsys, "export", sid, "--db", recorded.db, "-o", str(exported))[0] == 0
    assert exported.read_text().splitlines()[1:] == out.splitlines()[1:]  # the same events

    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text("".join(out.splitlines(keepends=True)[:-1]))
    code, _, err = navi(capsys, "import", str(truncated), "--db", db)
    assert code == 1 and "truncated" in err and "nothing was imported" in err
    code, _, _ = navi(capsys, "events", sid, "--db", db)
    assert code == 1  # nothing was written

    code, out, _ = navi(capsys, "import", str(exported), "--db", db)
    assert code == 0 and f"imported session {sid}" in out
    code, _, err = navi(capsys, "import", str(exported), "--db", db)
    assert code == 1 and "already exist" in err and "--as-new" in err
    code, out, _ = navi(capsys, "import", str(exported), "--db", db, "--as-new")
    assert code == 0 and "imported session" in out and sid not in out
    assert "owned by 'local'" in out  # the user the file names, without --user
    code, out, _ = navi(capsys, "import", str(exported), "--db", db, "--as-new", "--user", "bob")
    assert code == 0 and "owned by 'bob'" in out
    code, _, err = navi(capsys, "import", str(tmp_path / "missing.jsonl"), "--db", db)
    assert code == 2 and "cannot read" in err

    code, out, _ = navi(capsys, "verify", "--db", db)
    assert code == 0 and out.count("✓") == 3 and out.endswith("3 sessions verified, all good\n")

    plant_a_wrong_snapshot(db, sid)
    code, out, _ = navi(capsys, "verify", sid, "--db", db)
    assert code == 1 and f"✗ {sid}" in out
    assert "todo differs from seq 3 (snapshot at seq 3)" in out


def test_every_command_takes_a_unique_prefix(
    recorded: Recorded, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sid = recorded.session_id
    db = f"sqlite:///{tmp_path / 'copy.db'}"
    exported = tmp_path / "session.jsonl"
    assert navi(capsys, "export", sid, "--db", recorded.db, "-o", str(exported))[0] == 0
    for extra in ((), ("--as-new",), ("--as-new",)):
        assert navi(capsys, "import", str(exported), "--db", db, *extra)[0] == 0
    out = navi(capsys, "verify", "--db", db)[1]
    ids = sorted(line.split()[1].rstrip(":") for line in out.splitlines() if line[0] == "✓")
    assert len(ids) == 3 and sid in ids

    def unique(session: str) -> str:  # its shortest prefix no other session has
        return next(
            session[:n]
            for n in range(1, 37)
            if [i for i in ids if i.startswith(session[:n])] == [session]
        )

    prefix = unique(sid)
    assert len(prefix) < len(sid)
    for command in (
        ["events", prefix, "--type", "user.message"],
        ["inspect", prefix, "--approvals"],
        ["export", prefix],
        ["replay", prefix, "--speed", "max"],
        ["verify", prefix],
    ):
        code, out, err = navi(capsys, *command, "--db", db)
        assert code == 0, (command, err)
        assert sid in out or "bye" in out, (command, out)
    assert navi(capsys, "verify", prefix, "--db", db)[1].startswith(f"✓ {sid}: ")

    # A prefix two sessions share: one line that lists them.
    shared = max((os.path.commonprefix([a, b]) for a, b in itertools.pairwise(ids)), key=len)  # noqa: RUF071
    sharing = [i for i in ids if i.startswith(shared)]
    for command in ("events", "inspect", "export", "replay", "verify"):
        code, out, err = navi(capsys, command, shared, "--db", db)
        assert (code, out) == (1, ""), command
        assert err == (
            f"navi: {shared!r} is ambiguous: {len(sharing)} sessions start with it: "
            f"{', '.join(sharing)}\n"
        )


def plant_a_wrong_snapshot(db: str, session_id: str) -> None:
    from events.factory import store_for_url
    from events.types import TodoItem
    from navi.replay.snapshot_codec import CODECS
    from navi.replay.snapshot_store import snapshots_for

    async def plant() -> None:
        async with store_for_url(db) as store:
            codec = CODECS["todo"]
            payload = codec.full_payload((TodoItem(id=1, text="not in the log"),))
            await snapshots_for(store).save(
                session_id, 3, {"todo": (codec.schema_version, payload)}
            )

    anyio.run(plant)


def test_recompress(
    recorded: Recorded,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.support.fake_llm import FakeLLMServer

    db = f"sqlite:///{tmp_path / 'copy.db'}"
    exported = tmp_path / "session.jsonl"
    navi(capsys, "export", recorded.session_id, "--db", recorded.db, "-o", str(exported))
    assert navi(capsys, "import", str(exported), "--db", db)[0] == 0
    with FakeLLMServer.in_thread() as fake:
        for name, value in {
            "NAVI_LLM_BACKEND": "ollama",
            "OLLAMA_HOST": fake.url,
            "OLLAMA_DEFAULT_MODEL": "fake-model:latest",
            "CONTEXT_KEEP_RECENT": "1",
            "SESSION_FILES_DIR": str(tmp_path / "files"),
        }.items():
            monkeypatch.setenv(name, value)
        fake.script(Reply(text="- packing for a camping trip"))
        code, out, err = navi(capsys, "recompress", recorded.session_id, "--db", db, "--model",
                              "small-model:latest")  # fmt: skip
        assert code == 0, err
        assert "with small-model:latest" in out and "packing for a camping trip" in out
        assert fake.requests[-1]["model"] == "small-model:latest"
        code, _, err = navi(capsys, "recompress", "missing", "--db", db)
        assert code == 1 and "no session starts with 'missing'" in err
