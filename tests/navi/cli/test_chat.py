"""``navi chat`` against a real ``navi serve``: one turn, a pipe, session prefixes, the
one-line errors."""

from __future__ import annotations

import itertools
import os

from tests.navi.cli.conftest import CliWorld
from tests.navi.cli.terminal import run_navi
from tests.support.fake_llm_script import FakeToolCall, Reply
from tests.support.helpers import free_port


def test_one_turn_prints_the_answer_and_the_session(world: CliWorld) -> None:
    world.fake.script(Reply(thinking="Let me see.", text="The answer is **42**."))
    done = run_navi(world.env, "chat", "What is it?")
    assert done.returncode == 0, done.stderr
    # Not a terminal: the answer as it came, no thinking, no escape codes.
    assert done.stdout == "The answer is **42**.\n"
    assert "\x1b[" not in done.stdout
    session = done.stderr.removeprefix("session: ").strip()
    assert done.stderr == f"session: {session}\n"  # and no log lines
    [made] = [s for s in world.server.sessions() if s["session_id"] == session]
    assert made["origin"] == "cli"  # the web client's sidebar folds one-shots apart


def test_a_piped_message_runs_one_turn(world: CliWorld) -> None:
    world.fake.script(Reply(text="Hi there."))
    done = run_navi(world.env, "chat", stdin="hi\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hi there.\n"
    assert world.fake.requests[-1]["messages"][-1]["content"] == "hi"


def test_a_piped_run_writes_only_the_answer_to_stdout(world: CliWorld) -> None:
    world.fake.script(
        Reply(text="Let me look.", tool_calls=[FakeToolCall(name="list_tools", arguments={})]),
        Reply(text="It is now."),
    )
    done = run_navi(world.env, "chat", "time?")
    assert done.returncode == 0, done.stderr
    # The answer's text, whole, and nothing else: `navi chat … > answer.md` keeps its word.
    assert done.stdout == "Let me look.\nIt is now.\n"
    # The tool's lines on stderr, then the session.
    lines = done.stderr.splitlines()
    assert lines[0].startswith("⚙ list_tools")
    assert lines[1].startswith("  ✓ ")
    assert lines[-1].startswith("session: ")


def test_a_session_is_continued_by_a_prefix_of_its_id(world: CliWorld) -> None:
    world.fake.script(Reply(text="One."), Reply(text="Two."))
    first = run_navi(world.env, "chat", "first")
    session = first.stderr.split()[-1]
    ids = [s["session_id"] for s in world.server.sessions()]
    # The shortest prefix no other session has (ids are time-ordered UUIDv7s).
    prefix = next(
        session[:n]
        for n in range(1, len(session))
        if [i for i in ids if i.startswith(session[:n])] == [session]
    )
    done = run_navi(world.env, "chat", "--session", prefix, "second")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Two.\n"
    assert done.stderr == f"session: {session}\n"
    assert len(world.server.sessions()) == len(ids)
    assert [m["content"] for m in world.fake.requests[-1]["messages"] if m["role"] == "user"][
        -2:
    ] == ["first", "second"]


def test_an_unknown_or_ambiguous_session_is_one_line(world: CliWorld) -> None:
    done = run_navi(world.env, "chat", "--session", "nope", "hi")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "navi: no session starts with 'nope' (see `navi sessions`)\n"
    for i in range(2):
        assert run_navi(world.env, "chat", f"m{i}").returncode == 0
    ids = sorted(s["session_id"] for s in world.server.sessions())
    # The longest prefix that two sessions share (ids are time-ordered UUIDv7s).
    pairs = itertools.pairwise(ids)
    shared = max((os.path.commonprefix([a, b]) for a, b in pairs), key=len)  # noqa: RUF071
    done = run_navi(world.env, "chat", "--session", shared, "hi")
    assert done.returncode == 1
    assert done.stderr.startswith(f"navi: {shared!r} is ambiguous: ")
    assert done.stderr.count("\n") == 1


def test_no_server_is_one_line(world: CliWorld) -> None:
    # The module's server stays up (a restart costs seconds): NAVI_PORT names a port
    # where nothing listens, as after `navi serve` stopped.
    port = free_port()
    done = run_navi({**world.env, "NAVI_PORT": str(port)}, "chat", "hi")
    assert done.returncode == 1
    assert done.stderr == (
        f"navi: cannot reach Navi at http://127.0.0.1:{port}: start it with `navi serve`\n"
    )
