"""Real processes for the chaos suite (and bench/chaos.py): ``navi serve`` processes, the
chaos fake LLM, user tools whose effects can be counted, WebSocket clients that follow
a session across restarts, and the checks of what survived.

Effects: ``touch`` (idempotent) and ``mark`` (not idempotent) write one file per
execution, ``<token>.<random>``, into their session's files folder (the only folder a
user tool's sandbox may write), halfway through their sleep: a kill can come before the
effect, or after it but before the result is in the log (the in-doubt case). The
effects folder is therefore the servers' ``SESSION_FILES_DIR``.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

from events.envelope import Recorded
from events.factory import store_for_url
from events.types import (
    TERMINAL_RUN_EVENTS,
    RunStarted,
    SubagentSpawned,
    ToolCompleted,
    ToolFailed,
    ToolRequested,
)
from navi.server.frames import FrameTranslator
from tests.chaos.llm import NUM_CTX
from tests.support.frames import coalesce, wire
from tests.support.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]

TOOL = """
name = "{name}"
description = "Leave a countable effect for a token ({kind})."
parameters = {{
    "type": "object",
    "properties": {{"token": {{"type": "string"}}, "sleep": {{"type": "number"}}}},
    "required": ["token"],
}}
idempotent = {idempotent}

async def execute(params):
    import asyncio, os, uuid
    half = float(params.get("sleep") or 0) / 2
    await asyncio.sleep(half)
    name = params["token"] + "." + uuid.uuid4().hex
    with open(os.path.join(os.environ["NAVI_FILES_DIR"], name), "x") as f:
        f.write(params["token"])
    await asyncio.sleep(half)
    return "{verb} " + params["token"]
"""

END_FRAMES = ("stream_end", "stream_stopped")


def install_tools(root: Path) -> tuple[Path, Path]:
    """The user tools (``TOOLS_DIR``) and the effects folder (``SESSION_FILES_DIR``)."""
    tools = root / "user_tools"  # not "tools": the cwd is on sys.path
    tools.mkdir(parents=True, exist_ok=True)
    for name, idempotent, verb in (("touch", True, "touched"), ("mark", False, "marked")):
        kind = "idempotent" if idempotent else "not idempotent"
        (tools / f"{name}.py").write_text(
            TOOL.format(name=name, kind=kind, idempotent=idempotent, verb=verb)
        )
    (tools / "enabled.json").write_text(json.dumps(["touch", "mark"]))
    effects = root / "files"
    effects.mkdir(exist_ok=True)
    return tools, effects


class ChaosLLM:
    """``python -m tests.chaos.llm`` as a process; ``kill`` and ``start`` again keep the
    port, so Navi sees the same server die and come back."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        args = [sys.executable, "-m", "tests.chaos.llm", "--port", str(self.port)]
        self._process = subprocess.Popen(
            args, cwd=ROOT, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if "listening on" not in line:
            self.kill()
            raise RuntimeError(f"the chaos LLM did not start: {line!r}")

    def kill(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()

    def __enter__(self) -> ChaosLLM:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


@dataclass
class ServerConfig:
    root: Path
    database_url: str
    llm_url: str
    effects: Path
    tools: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NAVI_", "OLLAMA_"))}
        env.update(
            NAVI_DATA_DIR=str(self.root / "data"),
            NAVI_DATABASE_URL=self.database_url,
            NAVI_LLM_BACKEND="ollama",
            OLLAMA_HOST=self.llm_url,
            OLLAMA_DEFAULT_MODEL="fake-model:latest",
            OLLAMA_NUM_CTX=str(NUM_CTX),
            CONTEXT_KEEP_RECENT="2",
            TOOLS_DIR=str(self.tools),
            SESSION_FILES_DIR=str(self.effects),
            NAVI_PLANNING="off",
            LOG_LEVEL="WARNING",
            LLM_RETRY_BACKOFF_S="0.2",
            LLM_STREAM_FIRST_CHUNK_TIMEOUT="5",
            LLM_STREAM_CHUNK_TIMEOUT="5",
            NAVI_CLUSTER_SWEEP_S="0.5",
            MEMORY_IDLE_MINUTES="600",
            # The chaos tools (user tools) would ask before each call: no one answers here.
            NAVI_TOOL_APPROVAL="auto",
        )
        env.update(self.extra_env)
        return env


class NaviProcess:
    """One ``navi serve`` process; ``kill`` (SIGKILL) and ``start`` again on its port."""

    def __init__(self, config: ServerConfig, name: str = "a", port: int | None = None) -> None:
        self.config = config
        self.name = name
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}"
        self.starts = 0
        self.started_at = 0.0  # wall clock of the last start
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.starts += 1
        log = self.config.root / f"navi-{self.name}-{self.starts}.log"
        self.started_at = time.time()
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "navi.cli", "serve", "--port", str(self.port)],
                cwd=self.config.root,
                env=self.config.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    async def wait_up(self, wait_s: float = 30.0) -> None:
        deadline = time.monotonic() + wait_s
        async with httpx.AsyncClient(timeout=2) as http:
            while time.monotonic() < deadline:
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(f"navi serve {self.name} exited: see {self.logs()}")
                try:
                    if (await http.get(self.url + "/health")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await anyio.sleep(0.05)
        raise RuntimeError(f"navi serve {self.name} did not come up: see {self.logs()}")

    def logs(self) -> str:
        return str(self.config.root / f"navi-{self.name}-{self.starts}.log")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def freeze(self) -> None:
        """SIGSTOP: the process hangs with its connections open (a hung node)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    async def thaw_until_it_lets_go(self, wait_s: float = 30.0) -> None:
        """SIGCONT, then wait until the node has found its sessions taken over."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)
        log = Path(self.logs())
        with anyio.fail_after(wait_s):
            while "cluster.sessions_lost" not in log.read_text(errors="replace"):
                await anyio.sleep(0.1)

    def terminate(self, wait_s: float = 15.0) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(wait_s)
            except subprocess.TimeoutExpired:
                self.kill()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


async def create_session(base: str) -> str:
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        response = await http.post("/sessions", json={})
        response.raise_for_status()
        session_id: str = response.json()["session_id"]
        return session_id


async def send_message(ws_base: str, session_id: str, text: str, *, queue: bool = False) -> None:
    """Send a message over a WebSocket of its own and wait for the log to show it (its
    ``user_message`` frame); a queued one only for a refusal in the next moments. An
    ``error`` frame (a refusal) raises."""
    async with connect(f"{ws_base}/ws/sessions/{session_id}", open_timeout=10) as ws:
        await ws.send(json.dumps({"type": "message", "content": text, "queue": queue}))
        with anyio.move_on_after(0.3) if queue else anyio.fail_after(30):
            async for raw in ws:
                frame = json.loads(raw)
                if frame.get("type") == "error" and "seq" not in frame:
                    raise RuntimeError(f"the message was refused: {frame.get('message')}")
                if frame.get("type") == "user_message" and frame.get("content") == text:
                    return


class Watcher:
    """A client of one session that reconnects (to any of ``bases``, in turn) with
    ``?after=<last seq>&seen=<its frames so far>`` whenever its connection drops (a kill
    can fall between two frames of one event), and keeps every frame."""

    def __init__(self, session_id: str, bases: list[str], *, runs: int = 1) -> None:
        self.session_id = session_id
        self.bases = bases
        self.runs = runs
        self.frames: list[dict[str, Any]] = []
        self.sub_frames: list[dict[str, Any]] = []
        self.last_seq = 0
        self.seen = 0  # frames of event last_seq it has
        self.connections = 0
        self.ended = anyio.Event()
        self._ends = 0

    def expect_another_run(self) -> None:
        self.runs += 1
        if self._ends < self.runs:
            self.ended = anyio.Event()

    async def run(self) -> None:
        turn = 0
        while True:
            base = self.bases[turn % len(self.bases)]
            url = f"{base}/ws/sessions/{self.session_id}?after={self.last_seq}&seen={self.seen}"
            try:
                async with connect(url, open_timeout=3, close_timeout=0.5, max_size=None) as ws:
                    self.connections += 1
                    async for raw in ws:
                        self._take(json.loads(raw))
            except (OSError, WebSocketException, TimeoutError):
                pass
            turn += 1
            await anyio.sleep(0.05)

    def _take(self, frame: dict[str, Any]) -> None:
        if frame.get("is_subagent"):
            self.sub_frames.append(frame)
            return
        if "seq" not in frame:
            return
        self.frames.append(frame)
        self.seen = self.seen + 1 if frame["seq"] == self.last_seq else 1
        self.last_seq = frame["seq"]
        if frame["type"] in END_FRAMES:  # a failed run: an error, then stream_end
            self._ends += 1
            if self._ends >= self.runs:
                self.ended.set()


# ---------------------------------------------------------------- the log, read directly


class LogProbe:
    """Small read-only queries on the database, while servers run or after a kill."""

    def __init__(self, database_url: str) -> None:
        self.url = database_url

    async def heads(self) -> dict[str, int]:
        rows = await self._query("SELECT stream_id, max(seq) FROM navi_events GROUP BY stream_id")
        return {r[0]: int(r[1]) for r in rows}

    async def first_after(self, before: dict[str, int]) -> float | None:
        """The time of the earliest event written after ``before`` (stream → seq)."""
        found: list[float] = []
        for stream_id, seq in before.items():
            rows = await self._query(
                "SELECT min(timestamp) FROM navi_events WHERE stream_id = $1 AND seq > $2",
                stream_id,
                seq,
            )
            if rows and rows[0][0] is not None:
                found.append(float(rows[0][0]))
        return min(found) if found else None

    async def last_types(self, stream_ids: list[str]) -> dict[str, str]:
        found = {}
        for stream_id in stream_ids:
            rows = await self._query(
                "SELECT type FROM navi_events WHERE stream_id = $1 ORDER BY seq DESC LIMIT 1",
                stream_id,
            )
            if rows:
                found[stream_id] = str(rows[0][0])
        return found

    async def inside(self, stream_ids: list[str], opens: str, closes: tuple[str, ...]) -> bool:
        """Whether one of the streams is between an ``opens`` event and its close."""
        kinds = (opens, *closes)
        marks = ", ".join(f"'{k}'" for k in kinds)
        for stream_id in stream_ids:
            rows = await self._query(
                f"SELECT type, count(*) FROM navi_events WHERE stream_id = $1 AND type IN ({marks}) "
                "GROUP BY type",
                stream_id,
            )
            counts = {str(t): int(n) for t, n in rows}
            if counts.get(opens, 0) > sum(counts.get(c, 0) for c in closes):
                return True
        return False

    async def first_after_each(self, before: dict[str, int]) -> dict[str, float]:
        """Per stream, the time of its first event after ``before[stream]`` (if any)."""
        if not before:
            return {}
        items = list(before.items())
        pairs = ", ".join(f"(${2 * i + 1}, ${2 * i + 2}::bigint)" for i in range(len(items)))
        if self.url.startswith("sqlite"):
            pairs = pairs.replace("::bigint", "")
        rows = await self._query(
            f"WITH b(s, q) AS (VALUES {pairs}) SELECT e.stream_id, min(e.timestamp) "
            "FROM navi_events e JOIN b ON e.stream_id = b.s AND e.seq > b.q GROUP BY e.stream_id",
            *[v for item in items for v in item],
        )
        return {str(r[0]): float(r[1]) for r in rows}

    async def open_runs(self, session_ids: list[str]) -> list[str]:
        """Of these sessions, those whose last run has not ended."""
        rows = await self._query(
            "SELECT e.stream_id, e.type FROM navi_events e JOIN ("
            "  SELECT stream_id, max(seq) AS seq FROM navi_events WHERE type IN "
            "  ('run.started', 'run.completed', 'run.failed', 'run.stopped') GROUP BY stream_id"
            ") last ON e.stream_id = last.stream_id AND e.seq = last.seq"
        )
        started = {str(s) for s, t in rows if t == "run.started"}
        return [s for s in session_ids if s in started]

    async def _query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        if self.url.startswith("sqlite"):
            path = self.url.split(":///", 1)[1]
            lite = sql
            for i in range(len(args), 0, -1):
                lite = lite.replace(f"${i}", "?")

            def run() -> list[tuple[Any, ...]]:
                conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
                try:
                    return [tuple(r) for r in conn.execute(lite, args).fetchall()]
                finally:
                    conn.close()

            return await anyio.to_thread.run_sync(run)
        import asyncpg

        from events.postgres import asyncpg_dsn

        conn = await asyncpg.connect(asyncpg_dsn(self.url))
        try:
            return [tuple(r) for r in await conn.fetch(sql, *args)]
        finally:
            await conn.close()


async def read_logs(database_url: str, session_ids: list[str]) -> dict[str, list[Recorded]]:
    """Every session's log, and its subagents' (found through ``subagent.spawned``)."""
    logs: dict[str, list[Recorded]] = {}
    async with store_for_url(database_url) as store:
        todo = list(session_ids)
        while todo:
            stream_id = todo.pop()
            records = await store.read(stream_id)
            logs[stream_id] = records
            for record in records:
                if isinstance(record.event, SubagentSpawned):
                    todo.append(record.event.child_stream_id)
    return logs


# ---------------------------------------------------------------- what survived


@dataclass
class Findings:
    runs: int = 0
    runs_finished: int = 0
    runs_unfinished: int = 0
    interrupted_calls: int = 0
    calls: int = 0
    events_lost: int = 0
    frames_checked: int = 0
    duplicate_effects: int = 0
    missing_effects: int = 0
    orphan_effects: int = 0
    calls_without_result: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def effect_files(effects_dir: Path) -> list[Path]:
    """Every effect the tools left, in every session's files folder."""
    return [p for p in effects_dir.glob("*/*") if p.is_file()]


def check(logs: dict[str, list[Recorded]], effects_dir: Path, watchers: list[Watcher]) -> Findings:
    found = Findings()
    effects = Counter(p.name.rsplit(".", 1)[0] for p in effect_files(effects_dir))
    tokens_in_log: set[str] = set()
    for stream_id, records in logs.items():
        _check_runs(stream_id, records, found)
        _check_calls(stream_id, records, effects, tokens_in_log, found)
    for token in set(effects) - tokens_in_log:
        found.orphan_effects += 1
        found.problems.append(f"an effect of {token} with no call in any log")
    for watcher in watchers:
        _check_frames(watcher, logs, found)
    return found


def _check_runs(stream_id: str, records: list[Recorded], found: Findings) -> None:
    open_run: str | None = None
    for record in records:
        if isinstance(record.event, RunStarted):
            found.runs += 1
            open_run = record.run_id or ""
        elif record.type in TERMINAL_RUN_EVENTS and open_run is not None:
            found.runs_finished += 1
            open_run = None
    if open_run is not None:
        found.runs_unfinished += 1
        found.problems.append(f"{stream_id}: run {open_run} never ended")


def _check_calls(
    stream_id: str,
    records: list[Recorded],
    effects: Counter[str],
    tokens_in_log: set[str],
    found: Findings,
) -> None:
    requested: dict[str, ToolRequested] = {}
    results: dict[str, list[ToolCompleted | ToolFailed]] = {}
    for record in records:
        event = record.event
        if isinstance(event, ToolRequested):
            requested[event.call_id] = event
        elif isinstance(event, ToolCompleted | ToolFailed):
            results.setdefault(event.call_id, []).append(event)
    for call_id, call in requested.items():
        found.calls += 1
        ends = results.get(call_id, [])
        if len(ends) != 1:
            found.calls_without_result += 1
            found.problems.append(f"{stream_id}: call {call_id} has {len(ends)} results")
            continue
        end = ends[0]
        if isinstance(end, ToolFailed) and end.reason == "interrupted":
            found.interrupted_calls += 1
            if call.name != "mark":
                found.problems.append(f"{stream_id}: idempotent {call.name} marked in doubt")
        token = call.arguments.get("token")
        if call.name not in ("touch", "mark") or not isinstance(token, str):
            continue
        tokens_in_log.add(token)
        count = effects.get(token, 0)
        completed = isinstance(end, ToolCompleted)
        if call.name == "mark" and count > 1:
            found.duplicate_effects += 1
            found.problems.append(f"{stream_id}: non-idempotent mark {token} ran {count} times")
        if completed and count == 0:
            found.missing_effects += 1
            found.problems.append(f"{stream_id}: {call.name} {token} completed, no effect")


def _check_frames(watcher: Watcher, logs: dict[str, list[Recorded]], found: Findings) -> None:
    """Every frame the client got is the log's (same seq, same content), and the
    frames it ended up with are exactly the log's, in order."""
    records = logs.get(watcher.session_id, [])
    translator = FrameTranslator(max_context_tokens=NUM_CTX)
    # A client that lags gets runs of deltas merged (navi.server.frames.coalesce): compare
    # the text with runs merged on both sides.
    expected = coalesce(wire(frame for record in records for frame in translator.frames(record)))
    got = coalesce(watcher.frames)
    found.frames_checked += len(got)
    expected_keys = Counter(_key(f) for f in expected)
    lost = sum((Counter(_key(f) for f in got) - expected_keys).values())
    found.events_lost += lost
    if lost:
        found.problems.append(
            f"{watcher.session_id}: {lost} frames the client got are not in the log"
        )
    if [_key(f) for f in got] != [_key(f) for f in expected]:
        first = next(
            (i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if _key(a) != _key(b)),
            min(len(got), len(expected)),
        )
        found.problems.append(
            f"{watcher.session_id}: the client's frames differ from the log's from #{first} "
            f"(got {len(got)}, the log gives {len(expected)})"
        )
    for frame in watcher.sub_frames:
        child = logs.get(str(frame.get("subagent_id")), [])
        if not any(r.seq == frame["seq"] for r in child):
            found.events_lost += 1
            found.problems.append(f"subagent frame #{frame['seq']} is not in its log")


def _key(frame: dict[str, Any]) -> str:
    return json.dumps(frame, sort_keys=True)


# ---------------------------------------------------------------- one server, one run


@asynccontextmanager
async def single_server(
    root: Path, llm: ChaosLLM, *, database_url: str | None = None, **env: str
) -> AsyncIterator[NaviProcess]:
    """A ``navi serve`` (SQLite unless told) with the chaos tools; terminated after."""
    tools, effects = install_tools(root)
    config = ServerConfig(
        root=root,
        database_url=database_url or f"sqlite:///{root / 'navi.db'}",
        llm_url=llm.url,
        effects=effects,
        tools=tools,
        extra_env=env,
    )
    server = NaviProcess(config)
    server.start()
    try:
        await server.wait_up()
        yield server
    finally:
        server.terminate()


@asynccontextmanager
async def watched_run(server: NaviProcess, text: str) -> AsyncIterator[Watcher]:
    """A new session running ``text``, followed by a client for as long as the block."""
    session_id = await create_session(server.url)
    watcher = Watcher(session_id, [server.ws_url])
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        await send_message(server.ws_url, session_id, text)
        yield watcher
        tg.cancel_scope.cancel()
