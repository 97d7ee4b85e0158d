"""A real ``navi serve`` process with two users, for the benchmarks that measure what
one user's load does to another's requests (not a benchmark itself).

The server runs in its own process, as in production: measured from here, its event
loop's stalls are what a client meets. ``PYTHONPATH`` is passed on as it is, so
``PYTHONPATH=/path/to/older/checkout python bench/x.py`` measures that checkout's
server with this checkout's benchmark (before/after in one sitting).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from _common import ROOT
from tests.support.fake_llm import FakeLLMProcess
from tests.support.navi_server import free_port

ALICE = "alice-bench-token-0123456789"  # the user who loads the server
BOB = "bob-bench-token-0123456789"  # the user whose requests are timed


@dataclass
class NaviProcess:
    root: Path
    url: str
    llm: FakeLLMProcess
    process: subprocess.Popen[bytes]

    @property
    def database(self) -> Path:
        return self.root / "data" / "navi.db"

    def client(self, token: str, timeout: float = 120.0) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"authorization": f"Bearer {token}"}, timeout=timeout
        )


def _env(root: Path, llm_url: str, extra: dict[str, str]) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.setdefault("PYTHONPATH", str(ROOT))
    env.update(
        HOME=str(root / "home"),
        NAVI_DATA_DIR=str(root / "data"),
        NAVI_DATABASE_URL=f"sqlite:///{root / 'data' / 'navi.db'}",
        NAVI_USERS_FILE=str(root / "data" / "users.json"),
        NAVI_LLM_BACKEND="ollama",
        OLLAMA_HOST=llm_url,
        OLLAMA_DEFAULT_MODEL="fake-model:latest",
        OLLAMA_NUM_CTX="8192",
        TOOLS_DIR=str(root / "user_tools"),
        SESSION_FILES_DIR=str(root / "files"),
        NAVI_PLANNING="off",
        NAVI_TOOL_APPROVAL="auto",
        LOG_LEVEL="WARNING",
        LLM_RETRIES="0",
        MEMORY_IDLE_MINUTES="600",
    )
    env.update(extra)
    return env


@contextmanager
def navi_process(root: Path, env: dict[str, str] | None = None) -> Iterator[NaviProcess]:
    """``navi serve`` on a free port with users alice (admin) and bob (user); the
    database may be filled before (``root / "data" / "navi.db"``)."""
    for folder in ("cwd", "data", "files", "user_tools", "home"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    users = [
        {"id": "alice", "token": ALICE, "role": "admin"},
        {"id": "bob", "token": BOB, "role": "user"},
    ]
    (root / "data" / "users.json").write_text(json.dumps(users))
    port = free_port()
    with FakeLLMProcess(default_text="ok") as llm, open(root / "serve.log", "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "navi.cli", "serve", "--port", str(port)],
            cwd=root / "cwd",
            env=_env(root, llm.url, env or {}),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((root / "serve.log").read_text())
                try:
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.05)
            yield NaviProcess(root=root, url=url, llm=llm, process=process)
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
