"""A real ``navi serve`` process for the security suite, as an attacker meets it.

    def test_something(navi_process):            # the default set-up: 127.0.0.1, no token
        navi_process.llm.script(Reply(tool_calls=[FakeToolCall(name="code_exec", ...)]))
        sid = navi_process.create_session()
        navi_process.send(sid, "go")             # one whole turn (POST /sessions/{id}/messages)

    def test_shared(shared_navi):                # the same, one server for the whole module
        sid = shared_navi.create_session()       # (each test its own sessions)

    def test_other(start_navi):                  # a server with its own settings
        server = start_navi(users=[{"id": "alice", "token": ..., "role": "user"}],
                            env={"NAVI_UNSANDBOXED_TOOLS": "1"})

Every server gets canaries, so a test can tell whether anything escaped:
- ``CANARY_ENV``: secret-looking variables in the server's environment
  (``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``, ``NAVI_CANARY_SECRET``);
- ``server.canary_file``: a file outside every folder a tool may use, and
  ``server.home / ".ssh/id_ed25519"`` in the server's (fake) home folder;
- ``server.canary_session``: a session whose log holds ``CANARY_ROW`` (a canary row in
  the database), created before the test runs.
``server.leaked(text)`` says which canary values appear in ``text``.

A server costs seconds to start, so the tests of a module share one where they can
(``shared_navi``, or a module-scoped fixture of ``start_module_navi`` passed through
``fresh``): each such test makes its own sessions and compares what it changes before
and after. A test that stops or restarts the server, changes its settings or its users
file, or plants something in its log keeps a server of its own (``start_navi``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.fake_llm import FakeLLMProcess
from tests.support.helpers import SERVER_START_S, free_port, wait_until_serving

ROOT = Path(__file__).resolve().parents[2]

CANARY_ENV = {
    "OPENAI_API_KEY": "sk-canary-openai-7f3a9c",
    "AWS_SECRET_ACCESS_KEY": "canary-aws-secret-51be02",
    "NAVI_CANARY_SECRET": "canary-navi-secret-c0ffee",
}
CANARY_FILE_TEXT = "canary-file-contents-9d41e7"
CANARY_SSH_KEY = "canary-ssh-private-key-2b8f66"
CANARY_ROW = "canary-database-row-a17c55"
CANARY_VALUES = (*CANARY_ENV.values(), CANARY_FILE_TEXT, CANARY_SSH_KEY, CANARY_ROW)


@dataclass
class NaviServerProcess:
    """One ``navi serve`` on 127.0.0.1 with its own data under ``root``."""

    root: Path
    llm: FakeLLMProcess
    port: int
    env: dict[str, str]
    token: str | None = None
    process: subprocess.Popen[bytes] | None = None
    canary_session: str = ""
    starts: int = 0
    _logs: list[Path] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def canary_file(self) -> Path:
        return self.root / "outside" / "canary.txt"

    @property
    def database(self) -> Path:
        return self.root / "data" / "navi.db"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    # -- life ---------------------------------------------------------------------------

    def start(self, wait_s: float = SERVER_START_S) -> None:
        self.starts += 1
        log = self.root / f"navi-serve-{self.starts}.log"
        self._logs.append(log)
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "navi.cli", "serve", "--port", str(self.port)],
                cwd=self.root / "cwd",
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_until_serving(self.url + "/health", self.process, log=self.logs, limit_s=wait_s)

    def stop(self, sig: int = signal.SIGTERM, wait_s: float = 15.0) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(wait_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def logs(self) -> str:
        """Everything every start of this server printed (its log lines)."""
        return "".join(p.read_text(errors="replace") for p in self._logs if p.exists())

    # -- talking to it ------------------------------------------------------------------

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
        headers.update(extra)
        return headers

    def client(self, *, token: str | None = None, timeout: float = 60.0) -> httpx.Client:
        """An HTTP client with this server's token (or ``token``) in the header."""
        auth = token if token is not None else self.token
        headers = {"authorization": f"Bearer {auth}"} if auth else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def create_session(self, profile_id: str | None = None, *, token: str | None = None) -> str:
        body = {"profile_id": profile_id} if profile_id else {}
        with self.client(token=token) as http:
            response = http.post("/sessions", json=body)
            assert response.status_code == 201, response.text
            session_id: str = response.json()["session_id"]
            return session_id

    def send(self, session_id: str, text: str, *, token: str | None = None) -> httpx.Response:
        """One whole turn, answered when the run has ended."""
        with self.client(token=token, timeout=120) as http:
            return http.post(f"/sessions/{session_id}/messages", json={"content": text})

    def session(self, session_id: str, *, token: str | None = None) -> dict[str, Any]:
        with self.client(token=token) as http:
            response = http.get(f"/sessions/{session_id}")
            assert response.status_code == 200, response.text
            data: dict[str, Any] = response.json()
            return data

    def send_in_background(
        self, session_id: str, text: str = "go on", *, token: str | None = None
    ) -> threading.Thread:
        """A turn in a thread of its own (it waits for approvals); join it to wait for it."""

        def turn() -> None:
            with contextlib.suppress(httpx.HTTPError):  # a test may kill the server meanwhile
                self.send(session_id, text, token=token)

        thread = threading.Thread(target=turn)
        thread.start()
        return thread

    def pending(
        self, session_id: str, *, token: str | None = None, wait_s: float = 20
    ) -> list[dict[str, Any]]:
        """The session's approval requests, once there is one (fails after ``wait_s``)."""
        deadline = time.monotonic() + wait_s
        with self.client(token=token) as http:
            while time.monotonic() < deadline:
                response = http.get(f"/sessions/{session_id}/approvals")
                approvals: list[dict[str, Any]] = response.json()["approvals"]
                if approvals:
                    return approvals
                time.sleep(0.05)
        raise AssertionError("no approval request came")

    def tool_messages(self, session_id: str, *, token: str | None = None) -> list[dict[str, Any]]:
        """The session's tool results as the UI shows them (role ``tool``)."""
        messages = self.session(session_id, token=token)["messages"]
        return [m for m in messages if m.get("role") == "tool"]

    def leaked(self, text: str) -> list[str]:
        """The canary values found in ``text``."""
        return [value for value in CANARY_VALUES if value in text]


def _prepare(root: Path) -> None:
    for folder in ("cwd", "data", "files", "user_tools", "outside", "home/.ssh"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "outside" / "canary.txt").write_text(CANARY_FILE_TEXT)
    (root / "home" / ".ssh" / "id_ed25519").write_text(CANARY_SSH_KEY)


def _env(
    root: Path, llm_url: str, users_file: Path | None, extra: dict[str, str]
) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    # The project root on the path: `python -m navi.cli` from another folder, and the
    # tests' own modules (``tests.support``) for user tools that need them.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(CANARY_ENV)
    env.update(
        HOME=str(root / "home"),
        NAVI_DATABASE_URL=f"sqlite:///{root / 'data' / 'navi.db'}",
        NAVI_LLM_BACKEND="ollama",
        OLLAMA_HOST=llm_url,
        OLLAMA_DEFAULT_MODEL="fake-model:latest",
        OLLAMA_NUM_CTX="8192",
        TOOLS_DIR=str(root / "user_tools"),
        SESSION_FILES_DIR=str(root / "files"),
        NAVI_PLANNING="off",
        LOG_LEVEL="INFO",
        LLM_RETRIES="0",
        LLM_RETRY_BACKOFF_S="0.05",
        MEMORY_IDLE_MINUTES="600",
        # Most of this suite tries what a call can do once it runs (as if a person
        # approved it); tests of the approvals themselves set "" (the tools' defaults).
        NAVI_TOOL_APPROVAL="auto",
    )
    if users_file is not None:
        env["NAVI_USERS_FILE"] = str(users_file)
    # "{llm_url}" in a value: the fake LLM's URL (e.g. OPENAI_BASE_URL="{llm_url}/v1").
    env.update({name: value.replace("{llm_url}", llm_url) for name, value in extra.items()})
    return env


StartNavi = Callable[..., NaviServerProcess]


class _Starter:
    """``start_navi``'s function: every server in its own folder under ``base``, with its
    own fake LLM process and port; ``close()`` stops them all."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.started: list[tuple[NaviServerProcess, FakeLLMProcess]] = []

    def __call__(
        self,
        *,
        users: list[dict[str, Any]] | None = None,
        env: dict[str, str] | None = None,
        token: str | None = None,
        canary_row: bool = True,
    ) -> NaviServerProcess:
        root = self.base / f"navi{len(self.started)}"
        _prepare(root)
        users_file = None
        if users is not None:
            users_file = root / "data" / "users.json"
            users_file.write_text(json.dumps(users))
            if token is None:
                token = next((u.get("token") for u in users if u.get("role") == "admin"), None)
        llm = FakeLLMProcess(default_text="ok").__enter__()
        server = NaviServerProcess(
            root=root,
            llm=llm,
            port=free_port(),
            env=_env(root, llm.url, users_file, env or {}),
            token=token,
        )
        self.started.append((server, llm))
        server.start()
        if canary_row:
            server.canary_session = server.create_session()
            llm.script()
            response = server.send(server.canary_session, f"remember {CANARY_ROW}")
            assert response.status_code == 200, response.text
        return server

    def close(self) -> None:
        for server, llm in reversed(self.started):
            server.stop()
            llm.__exit__(None, None, None)


@pytest.fixture
def start_navi(tmp_path: Path) -> Iterator[StartNavi]:
    """Starts ``navi serve`` processes: ``start_navi(users=[...], env={...}, token=...)``.

    ``users``: the users file's entries (``NAVI_USERS_FILE``); ``token``: the token the
    server object's own client sends; ``env``: more environment variables. Each call
    gets its own folder, fake LLM process and port; all are stopped at the end."""
    starter = _Starter(tmp_path)
    yield starter
    starter.close()


@pytest.fixture(scope="module")
def start_module_navi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartNavi]:
    """``start_navi`` for servers that the tests of one module share (see ``fresh``):
    started once, stopped after the module's last test."""
    starter = _Starter(tmp_path_factory.mktemp("navi-module"))
    yield starter
    starter.close()


def fresh(server: NaviServerProcess) -> NaviServerProcess:
    """A shared server, ready for the next test as a new one would be: running (a test
    before may have stopped or restarted it), and its fake LLM with no scripted reply
    left over and no request recorded. Each test that shares a server uses its own
    sessions (and the canary session, which every test may read)."""
    if server.process is None or server.process.poll() is not None:
        server.start()
    server.llm.reset()
    return server


@pytest.fixture(scope="module")
def _module_navi_process(start_module_navi: StartNavi) -> NaviServerProcess:
    return start_module_navi()


@pytest.fixture
def navi_process(start_navi: StartNavi) -> NaviServerProcess:
    """``navi serve`` in its default set-up: bound to 127.0.0.1, no token."""
    return start_navi()


@pytest.fixture
def shared_navi(_module_navi_process: NaviServerProcess) -> NaviServerProcess:
    """``navi_process``, one per test module: for tests that neither restart the server
    nor change what it sees beyond their own sessions."""
    return fresh(_module_navi_process)


def ws_frames(ws: Any, quiet_s: float = 0.5) -> list[dict[str, Any]]:
    """What the server sends until it has been quiet for ``quiet_s``; a ping on the way
    must be answered (the connection is up)."""
    ws.send(json.dumps({"type": "ping"}))
    frames, ponged = [], False
    while True:
        try:
            frame = json.loads(ws.recv(timeout=quiet_s))
        except TimeoutError:
            assert ponged, "the connection does not answer"
            return frames
        if frame["type"] == "pong":
            ponged = True
        else:
            frames.append(frame)


def import_forged(client: httpx.Client, session_id: str, replace: dict[str, str]) -> str:
    """Export ``session_id``, replace each key of ``replace`` in its text by its value
    (a forged log), import it as a new session; its id. (Fresh event ids: an import
    never takes an event id that is already stored.)"""
    export = client.get(f"/sessions/{session_id}/export")
    assert export.status_code == 200, export.text
    forged = str(uuid.uuid4())
    lines = []
    for line in export.text.splitlines():
        line = line.replace(session_id, forged)
        for old, new in replace.items():
            line = line.replace(old, new)
        record = json.loads(line)
        if "event_id" in record:
            record["event_id"] = str(uuid.uuid4())
        lines.append(json.dumps(record))
    imported = client.post(
        "/sessions/import",
        content="\n".join(lines) + "\n",
        headers={"content-type": "application/x-ndjson"},
    )
    assert imported.status_code in (200, 201), imported.text
    return forged
