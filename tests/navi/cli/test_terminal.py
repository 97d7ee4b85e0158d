"""``navi chat`` at a terminal (a pseudo-terminal): the interactive session, Markdown,
the spinner, ``NO_COLOR``, and Ctrl+C stopping the run for good."""

from __future__ import annotations

import re
import time

import httpx

from tests.navi.cli.conftest import CliWorld
from tests.navi.cli.terminal import Terminal, events
from tests.support.fake_llm_script import Reply

# An SGR sequence that sets a colour (foreground, background, 256 or true colour).
COLOUR = re.compile(r"\x1b\[[0-9;]*(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")
MARKDOWN = "# Title\n\nSome **bold** text, `code` and a list:\n\n- one\n- two\n"


def _slow_story(words: int = 300) -> Reply:
    return Reply(text=[f"word{i} " for i in range(words)], delay=0.1)


def _types(world: CliWorld, session: str) -> list[str]:
    return [line["type"] for line in events(world.env, session)]


def test_an_interactive_session_renders_markdown_after_a_spinner(world: CliWorld) -> None:
    world.fake.script(
        Reply(thinking="Pondering deeply.", text=MARKDOWN, delay_first=1.5, delay=0.05),
        Reply(text="Second answer."),
    )
    term = Terminal(world.env, "chat")
    try:
        banner = term.expect(r"Ctrl\+D leaves\n>")
        assert "a new session · model fake-model" in banner  # the model it will answer with
        term.type("hello\x1b\rsecond line\r")  # Esc Enter: a new line; Enter: send
        screen = term.expect(r"\d+ tokens")
        assert "waiting for the model…" in screen  # the silent prefill
        assert "Pondering deeply." in screen
        assert "Some bold text, code and a list:" in screen  # rendered, not raw
        assert "• one" in screen
        assert COLOUR.search(term.raw.decode())  # `code` is coloured
        term.type("again\r")
        # The answer, its figures, then the prompt again: Ctrl+D leaves from there.
        term.expect(r"Second answer\.[\s\S]*\d+ tokens?[\s\S]*>")
        term.type("\x04")  # Ctrl+D leaves
        assert term.wait(15) == 0
    finally:
        term.close()
    user_messages = [
        m["content"] for m in world.fake.requests[-1]["messages"] if m["role"] == "user"
    ]
    assert user_messages == ["hello\nsecond line", "again"]
    history = (world.root / "data" / "chat_history").read_text()
    assert "+hello\n+second line\n" in history and "+again\n" in history


def test_no_color_means_no_colours(world: CliWorld) -> None:
    world.fake.script(Reply(text=MARKDOWN))
    term = Terminal({**world.env, "NO_COLOR": "1"}, "chat", "show me")
    try:
        assert term.wait(30) == 0
        screen = term.text
    finally:
        term.close()
    assert "Some bold text, code and a list:" in screen
    assert not COLOUR.search(term.raw.decode())


def test_ctrl_c_stops_the_run_and_the_next_serve_does_not_finish_it(world: CliWorld) -> None:
    world.fake.script(_slow_story())
    term = Terminal(world.env, "chat", "tell me a long story")
    try:
        term.expect(r"word5\b")
        term.type("\x03")  # Ctrl+C
        assert term.wait(15) == 130
        screen = term.text
    finally:
        term.close()
    assert "[stopped]" in screen
    session = re.findall(r"session: (\S+)", screen)[-1]
    logged = _types(world, session)
    assert logged[-1] == "run.stopped"
    # A restart has nothing to resume: no new request to the LLM, no new event.
    requests = len(world.fake.requests)
    world.server.stop()
    world.server.start()
    # A next turn is the barrier: a run the restart resumed would have to end before it
    # starts, so its request and events would come before the turn's own.
    world.fake.script(Reply(text="Next."))
    turn = httpx.post(
        f"{world.server.url}/sessions/{session}/messages", json={"content": "next"}, timeout=60
    )
    assert turn.status_code == 200, turn.text
    assert len(world.fake.requests) == requests + 1
    assert world.fake.requests[-1]["messages"][-1]["content"] == "next"
    after = _types(world, session)
    assert after[: len(logged)] == logged and after[len(logged)] == "user.message", after


def test_ctrl_c_in_an_interactive_session_stops_the_answer_and_keeps_the_prompt(
    world: CliWorld,
) -> None:
    world.fake.script(_slow_story(), Reply(text="Short one."))
    term = Terminal(world.env, "chat")
    try:
        term.expect(r"leaves\n>")
        term.type("a story please\r")
        term.expect(r"word5\b")
        term.type("\x03")
        term.expect(r"\[stopped\]")
        term.type("now short\r")
        term.expect(r"Short one\.[\s\S]*\d+ tokens?[\s\S]*>")  # the prompt is back
        term.type("\x03")  # Ctrl+C on an empty prompt leaves
        assert term.wait(15) == 0
        session = re.findall(r"session: (\S+)", term.text)[-1]
    finally:
        term.close()
    types = _types(world, session)
    assert types.count("run.stopped") == 1
    assert types.count("run.completed") == 1


def test_ctrl_c_during_the_silent_prefill_stops_the_run(world: CliWorld) -> None:
    world.fake.script(Reply(text="Too late.", delay_first=20))
    term = Terminal(world.env, "chat", "think long")
    try:
        term.expect("waiting for the model…")
        requests = len(world.fake.requests)
        term.type("\x03")
        assert term.wait(15) == 130
        screen = term.text
    finally:
        term.close()
    assert "[stopped]" in screen and "Too late." not in screen
    session = re.findall(r"session: (\S+)", screen)[-1]
    assert _types(world, session)[-1] == "run.stopped"
    assert len(world.fake.requests) == requests


def test_two_ctrl_c_leave_at_once_without_a_traceback(world: CliWorld) -> None:
    world.fake.script(_slow_story())
    term = Terminal(world.env, "chat", "tell me another long story")
    try:
        term.expect(r"word3\b")
        term.type("\x03")
        term.type("\x03")
        assert term.wait(10) == 130
        screen = term.text
    finally:
        term.close()
    assert "Traceback" not in screen
    session = re.findall(r"session: (\S+)", screen)[-1]
    deadline = time.monotonic() + 10
    while (types := _types(world, session))[-1] != "run.stopped" and time.monotonic() < deadline:
        time.sleep(0.2)  # the stop was sent before leaving
    assert types[-1] == "run.stopped"


def test_leaving_an_interactive_session_at_once_makes_no_session(world: CliWorld) -> None:
    before = len(world.server.sessions())
    term = Terminal(world.env, "chat")
    try:
        term.expect(r"a new session")
        term.expect(r"leaves\n>")
        term.type("\x04")
        assert term.wait(15) == 0
    finally:
        term.close()
    assert len(world.server.sessions()) == before


def test_an_unknown_profile_is_one_line(world: CliWorld) -> None:
    term = Terminal(world.env, "chat", "--profile", "nobody")
    try:
        assert term.wait(15) == 1
        screen = term.text
    finally:
        term.close()
    assert screen.startswith("navi: no profile 'nobody': ")
    assert screen.count("\n") == 1
