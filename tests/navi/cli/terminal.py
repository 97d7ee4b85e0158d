"""Real processes for the CLI tests: ``navi serve`` on a free port with the fake LLM
process behind it, ``navi`` commands run as plain subprocesses or in a pseudo-terminal
(stdlib ``pty``: what a user at a terminal types, Ctrl+C included)."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.helpers import wait_until_serving

ROOT = Path(__file__).resolve().parents[3]
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]|\r")

# The child makes the pty its controlling terminal, so Ctrl+C typed on it is a SIGINT
# to the foreground process group, as in a real terminal (no fork in the test process).
_CONTROLLING_TTY = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, '-m', 'navi.cli', *sys.argv[1:]])"
)


def navi_env(root: Path, llm_url: str, port: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NAVI_", "OLLAMA_"))}
    env.pop("NO_COLOR", None)
    env.update(
        HOME=str(root / "home"),
        PYTHONPATH=str(ROOT),
        NAVI_DATA_DIR=str(root / "data"),
        NAVI_DATABASE_URL=f"sqlite:///{root / 'navi.db'}",
        NAVI_PORT=str(port),
        NAVI_LLM_BACKEND="ollama",
        OLLAMA_HOST=llm_url,
        OLLAMA_DEFAULT_MODEL="fake-model:latest",
        TOOLS_DIR=str(root / "user_tools"),
        SESSION_FILES_DIR=str(root / "files"),
        NAVI_PLANNING="off",
        LOG_LEVEL="WARNING",
        MEMORY_IDLE_MINUTES="600",
        TERM="xterm-256color",
        # The test terminal does not answer cursor-position requests.
        PROMPT_TOOLKIT_NO_CPR="1",
    )
    env.update(extra)
    (root / "home").mkdir(parents=True, exist_ok=True)
    return env


class NaviServe:
    """``navi serve`` as a subprocess; ``stop`` (SIGTERM) and ``start`` again."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        self.url = f"http://127.0.0.1:{env['NAVI_PORT']}"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        with open(self.root / f"serve-{self.starts}.log", "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "navi.cli", "serve"],
                cwd=self.root,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_until_serving(self.url + "/health", self.process, log=self.log)

    def log(self) -> str:
        return (self.root / f"serve-{self.starts}.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def sessions(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = httpx.get(self.url + "/sessions", timeout=10).json()
        return result


def run_navi(
    env: dict[str, str], *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "navi.cli", *args],
        env=env,
        cwd=cwd or ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def events(env: dict[str, str], session: str) -> list[dict[str, Any]]:
    """The session's log, through ``navi events --json``."""
    done = run_navi(env, "events", session, "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


class Terminal:
    """A ``navi`` command in a pseudo-terminal of ``rows`` x ``cols``."""

    def __init__(self, env: dict[str, str], *args: str, rows: int = 30, cols: int = 100) -> None:
        import fcntl
        import struct
        import termios

        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CONTROLLING_TTY, *args],
            env=env,
            cwd=ROOT,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.raw = b""
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if not ready:
                if self.process.poll() is not None:
                    return
                continue
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the child closed the terminal
                return
            if not chunk:
                return
            with self._lock:
                self.raw += chunk

    @property
    def text(self) -> str:
        with self._lock:
            return ANSI.sub("", self.raw.decode(errors="replace"))

    def expect(self, pattern: str, timeout: float = 30) -> str:
        """Wait until the screen's text (without escape codes) matches ``pattern``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.text):
                return self.text
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} never appeared in:\n{self.text[-3000:]}")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def wait(self, timeout: float = 30) -> int:
        code = self.process.wait(timeout)
        self._reader.join(5)
        return code

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join(5)
        os.close(self.master)
