"""``navi chat`` when the server goes away mid-answer: one line, not a traceback (a
module of its own: its server resumes the cut run when it starts again)."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.navi.cli.conftest import CliWorld
from tests.navi.cli.terminal import ROOT
from tests.support.fake_llm_script import Reply


def test_a_server_killed_mid_answer_is_one_line(world: CliWorld) -> None:
    world.fake.script(Reply(text=[f"word{i} " for i in range(300)], delay=0.1))
    chat = subprocess.Popen(
        [sys.executable, "-m", "navi.cli", "chat", "a long story"],
        env=world.env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not world.fake.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # some words are out
        world.server.kill()
        out, err = chat.communicate(timeout=30)
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait()
    assert chat.returncode == 1
    assert out.startswith("word0 word1 ")
    assert err.startswith("navi: the connection to Navi closed")
    assert err.count("\n") == 1, err
