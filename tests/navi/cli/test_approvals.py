"""Approvals from the terminal, against a real ``navi serve`` whose tools all ask
(``NAVI_TOOL_APPROVAL=ask``): the question ``navi chat`` asks (y / a / n with a reason,
Ctrl+C), a piped chat that says how to decide and waits, and ``navi approvals``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.navi.cli.conftest import CliWorld, cli_world
from tests.navi.cli.terminal import ROOT, Terminal, events, run_navi
from tests.support.fake_llm_script import FakeToolCall, Reply

LIST = FakeToolCall(name="list_tools", arguments={})
NOTE = "\n".join(f"l{i}" for i in range(30))
LONG = FakeToolCall(
    name="scratchpad", arguments={"action": "write", "section": "notes", "content": NOTE}
)


@pytest.fixture(scope="module")
def asking(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliWorld]:
    with cli_world(tmp_path_factory.mktemp("navi-ask"), NAVI_TOOL_APPROVAL="ask") as running:
        yield running


def _log(world: CliWorld, session: str) -> defaultdict[str, list[dict[str, Any]]]:
    """The session's events' payloads by type, from one ``navi events --json`` (a
    process start each: a test reads the log once, after the fact)."""
    by_type: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events(world.env, session):
        by_type[event["type"]].append(event["payload"])
    return by_type


def _session_of(text: str) -> str:
    found = re.search(r"session: ([0-9a-f-]{36})", text)
    assert found, text
    return found.group(1)


# ---------------------------------------------------------------- navi chat, asked


def test_y_approves_once_and_the_call_runs(asking: CliWorld) -> None:
    asking.fake.script(Reply(tool_calls=[LONG]), Reply(text="Done."))
    term = Terminal(asking.env, "chat", "what tools?")
    try:
        screen = term.expect(
            r"\[y\] once · \[a\] Allow every scratchpad call in this chat · \[n\] deny"
        )
        assert "scratchpad waits for approval" in screen
        assert "asked by: the operator (NAVI_TOOL_APPROVAL=ask)" in screen
        assert "for this session: Allow every scratchpad call in this chat" in screen
        assert "action: write" in screen
        # A long value is shown whole: a folded one could hide what runs.
        assert re.search(r"\bl8\b", screen) and re.search(r"\bl29\b", screen)
        assert "more lines" not in screen
        term.type("y\r")
        term.expect(r"approved by local")
        assert term.wait() == 0, term.text
        assert "Done." in term.text
    finally:
        term.close()
    log = _log(asking, _session_of(term.text))
    [decided] = log["tool.approval_decided"]
    assert (decided["approved"], decided["scope"], decided["by"]) == (True, "once", "local")
    assert len(log["tool.completed"]) == 1


def test_a_approves_the_tool_for_the_session(asking: CliWorld) -> None:
    asking.fake.script(Reply(tool_calls=[LIST]), Reply(tool_calls=[LIST]), Reply(text="Twice."))
    term = Terminal(asking.env, "chat", "list twice")
    try:
        term.expect(r"\[n\] deny")
        term.type("a\r")
        term.expect(r"approved \(Allow every list_tools call in this chat\) by local")
        assert term.wait() == 0, term.text
    finally:
        term.close()
    log = _log(asking, _session_of(term.text))
    assert len(log["tool.approval_requested"]) == 1  # asked once
    assert len(log["tool.completed"]) == 2
    assert log["tool.approval_decided"][0]["scope"] == "session"


def test_n_denies_with_a_reason_the_llm_reads(asking: CliWorld) -> None:
    asking.fake.script(Reply(tool_calls=[LIST]), Reply(text="Understood."))
    term = Terminal(asking.env, "chat", "list")
    try:
        term.expect(r"\[n\] deny")
        term.type("maybe\r")  # not an answer: asked again
        term.type("n\r")
        term.expect(r"reason \(optional")
        term.type("not now\r")
        term.expect(r"denied by local: not now")
        assert term.wait() == 0, term.text
    finally:
        term.close()
    [failed] = _log(asking, _session_of(term.text))["tool.failed"]
    assert failed["reason"] == "denied"
    sent = [m["content"] for m in asking.fake.requests[-1]["messages"] if m["role"] == "tool"]
    assert any("declined this call: not now" in c for c in sent)


def test_ctrl_c_while_asked_stops_the_run(asking: CliWorld) -> None:
    asking.fake.script(Reply(tool_calls=[LIST]))  # no second call: nothing left queued
    term = Terminal(asking.env, "chat", "list")
    try:
        term.expect(r"\[n\] deny")
        term.type("\x03")
        term.expect(r"\[stopped\]")
        assert term.wait() == 130
    finally:
        term.close()
    log = _log(asking, _session_of(term.text))
    assert [f["reason"] for f in log["tool.failed"]] == ["stopped"]
    assert log["run.stopped"]
    assert not log["tool.approval_decided"]


def test_the_interactive_chat_asks_and_gives_the_prompt_back(asking: CliWorld) -> None:
    asking.fake.script(Reply(tool_calls=[LIST]), Reply(text="All listed."))
    term = Terminal(asking.env, "chat")
    try:
        term.expect(r"Ctrl\+D leaves\n>")
        term.type("list\r")
        term.expect(r"\[n\] deny")
        term.type("y\r")
        term.expect(r"All listed\.[\s\S]*\n>")
        term.type("\x04")  # Ctrl+D leaves
        assert term.wait() == 0, term.text
    finally:
        term.close()
    assert len(_log(asking, _session_of(term.text))["tool.completed"]) == 1


# ---------------------------------------------------------------- piped, and navi approvals


class WaitingChat:
    """``navi chat "…"`` with no terminal: it says on stderr that a call waits."""

    def __init__(self, world: CliWorld, message: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "navi.cli", "chat", message],
            env=world.env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.err = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + 30
        while "waiting for a decision" not in self.err:
            assert time.monotonic() < deadline, self.err
            assert self.process.poll() is None, self.err
            time.sleep(0.05)
        self.session = _session_of(self.err.replace("· session ", "session: "))
        found = re.search(r"call (\S+) ·", self.err)
        assert found, self.err
        self.call_id = found.group(1)

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.err += line

    def finish(self) -> tuple[int, str]:
        assert self.process.stdout is not None
        out = self.process.stdout.read()
        code = self.process.wait(30)
        self._reader.join(5)
        return code, out

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join(5)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def test_a_piped_chat_says_how_to_decide_and_waits_for_navi_approvals(asking: CliWorld) -> None:
    asking.fake.script(Reply(tool_calls=[LIST]), Reply(text="Listed."))
    chat = WaitingChat(asking, "list")
    try:
        assert f"navi approvals {chat.session} --approve {chat.call_id}" in chat.err
        listed = run_navi(asking.env, "approvals", chat.session[:13])
        assert listed.returncode == 0, listed.stderr
        assert f"1 call waits for approval in session {chat.session}:" in listed.stdout
        assert "list_tools waits for approval" in listed.stdout
        assert f"call {chat.call_id} · stream {chat.session}" in listed.stdout
        assert "asked by: the operator (NAVI_TOOL_APPROVAL=ask)" in listed.stdout
        done = run_navi(asking.env, "approvals", chat.session, "--approve", chat.call_id[:6])
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"  ✓ {chat.call_id} (list_tools) approved by local\n"
        code, out = chat.finish()
    finally:
        chat.close()
    assert code == 0, chat.err
    assert out == "Listed.\n"
    again = run_navi(asking.env, "approvals", chat.session, "--deny", chat.call_id)
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr == f"navi: call {chat.call_id!r} was already decided or has ended\n"
    empty = run_navi(asking.env, "approvals", chat.session)
    assert empty.stdout == f"No call waits for approval in session {chat.session}.\n"


def test_navi_approvals_denies_with_a_reason(asking: CliWorld) -> None:
    asking.fake.script(Reply(tool_calls=[LIST]), Reply(text="Fine then."))
    chat = WaitingChat(asking, "list")
    try:
        done = run_navi(
            asking.env, "approvals", chat.session, "--deny", chat.call_id, "--reason", "no need"
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"  ✗ {chat.call_id} (list_tools) denied by local: no need\n"
        code, out = chat.finish()
    finally:
        chat.close()
    assert code == 0, chat.err
    assert out == "Fine then.\n"  # the answer alone: the decision's line is on stderr
    assert f"✗ {chat.call_id} denied by local: no need" in chat.err
    [decided] = _log(asking, chat.session)["tool.approval_decided"]
    assert (decided["approved"], decided["reason"]) == (False, "no need")


def test_navi_approvals_errors_are_one_line(asking: CliWorld) -> None:
    unknown = run_navi(asking.env, "approvals", "nope")
    assert (unknown.returncode, unknown.stderr) == (
        1,
        "navi: no session starts with 'nope' (see `navi sessions`)\n",
    )
    asking.fake.script(Reply(text="Hello."))
    session = run_navi(asking.env, "chat", "hi").stderr.split()[-1]
    call = run_navi(asking.env, "approvals", session, "--approve", "call_nope")
    assert (call.returncode, call.stdout) == (1, "")
    assert call.stderr == "navi: no call 'call_nope' waits for approval in this session\n"
    wrong = run_navi(asking.env, "approvals", session, "--session-scope")
    assert wrong.returncode == 2
    assert "--session-scope goes with --approve" in wrong.stderr
    gone = run_navi(asking.env, "approvals", session, "--url", "http://127.0.0.1:1")
    assert (
        gone.stderr == "navi: cannot reach Navi at http://127.0.0.1:1: start it with `navi serve`\n"
    )
    assert "Traceback" not in unknown.stderr + call.stderr + wrong.stderr + gone.stderr


# ---------------------------------------------------------------- afterwards: the log


def test_inspect_replay_and_the_timeline_show_the_approval(asking: CliWorld) -> None:
    asking.fake.script(Reply(tool_calls=[LIST]), Reply(text="Listed."))
    chat = WaitingChat(asking, "list")
    try:
        time.sleep(0.3)  # a wait the log can measure
        done = run_navi(asking.env, "approvals", chat.session, "--approve", chat.call_id)
        assert done.returncode == 0, done.stderr
        assert chat.finish()[0] == 0, chat.err
    finally:
        chat.close()
    session = chat.session
    recorded = events(asking.env, session)
    [asked] = [e for e in recorded if e["type"] == "tool.approval_requested"]
    llm = next(e["seq"] for e in recorded if e["type"] == "llm.requested")

    shown = run_navi(asking.env, "inspect", session, "--approvals")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"approvals in session {session}: 1"
    assert (
        f"seq {asked['seq']}: list_tools (call {chat.call_id}, policy: NAVI_TOOL_APPROVAL)"
        in (lines[1])
    )
    assert lines[2].strip() == "Run the tool list_tools with the arguments shown"
    assert lines[3].strip() == "asked by the operator (NAVI_TOOL_APPROVAL=ask)"
    waited = re.fullmatch(r" +approved by local at seq \d+, after ([\d.]+) s", lines[4])
    assert waited and float(waited.group(1)) >= 0.3, lines[4]
    assert f"navi inspect {session} --at {asked['seq']}" in shown.stdout
    assert f"navi inspect {session} --request {llm}" in shown.stdout

    as_json = run_navi(asking.env, "inspect", session, "--approvals", "--json")
    [view] = json.loads(as_json.stdout)
    assert (view["outcome"], view["by"], view["llm_request_seq"]) == ("approved", "local", llm)
    assert view["waited_s"] >= 0.3

    # Right after the request: the state then, and the approval still waiting.
    at = run_navi(asking.env, "inspect", session, "--at", str(asked["seq"]))
    assert "run state: awaiting_approval" in at.stdout
    assert "approvals: 1" in at.stdout and "waiting for a decision" in at.stdout

    replayed = run_navi(asking.env, "replay", session, "--speed", "max")
    assert (
        "⏸ waits for approval (Run the tool list_tools with the arguments shown; "
        "asked by the operator (NAVI_TOOL_APPROVAL=ask))"
    ) in replayed.stdout
    assert "approved by local" in replayed.stdout

    timeline = httpx.get(f"{asking.server.url}/sessions/{session}/timeline", timeout=10).json()
    [wait] = [s for s in timeline["lanes"][0]["spans"] if s["kind"] == "approval"]
    assert wait["label"] == "approval · list_tools · approved by local"
    assert wait["first"] == asked["seq"] and wait["duration"] >= 0.3
