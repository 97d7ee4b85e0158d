"""SQLite refusing writes under a real ``navi serve``: the database locked by another
process for longer than the busy timeout, and the disk full. The error is logged
clearly, the run stops writing, the file is never corrupted, and once the database
takes writes again the session actor, restarted with back-off, continues the run by
the resume rules: nothing a client saw is lost, no non-idempotent call runs twice."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import anyio
import pytest

from tests.chaos.harness import (
    ChaosLLM,
    LogProbe,
    NaviProcess,
    check,
    read_logs,
    single_server,
    watched_run,
)
from tests.chaos.llm import spec_line
from tests.chaos.scenario import wait_for_moment

BUSY_TIMEOUT_S = 10  # events/sqlite.py


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def _log_text(server: NaviProcess) -> str:
    return "".join(p.read_text(errors="replace") for p in server.config.root.glob("navi-*.log"))


async def test_a_database_locked_too_long_pauses_the_run_and_loses_nothing(tmp_path: Path) -> None:
    with ChaosLLM() as llm:
        async with single_server(tmp_path, llm) as server:
            db = tmp_path / "navi.db"
            async with watched_run(
                server, spec_line("lk1", steps=4, calls=2, sleep=0.3)
            ) as watcher:
                probe = LogProbe(server.config.database_url)
                assert await wait_for_moment(probe, [watcher.session_id], "mid-tool", 20)
                held = threading.Event()

                def hold_the_lock() -> None:
                    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
                    conn.execute("BEGIN EXCLUSIVE")
                    held.set()
                    time.sleep(BUSY_TIMEOUT_S + 2)
                    conn.execute("ROLLBACK")
                    conn.close()

                thread = threading.Thread(target=hold_the_lock)
                thread.start()
                held.wait(10)
                with anyio.fail_after(60):
                    await watcher.ended.wait()
                await anyio.to_thread.run_sync(thread.join)
            logs_text = _log_text(server)
        logs = await read_logs(server.config.database_url, [watcher.session_id])
    assert "database is locked" in logs_text
    assert _integrity(db) == "ok"
    findings = check(logs, server.config.effects, [watcher])
    assert findings.problems == [], findings.problems
    assert logs[watcher.session_id][-1].type == "run.completed"


def _mount_tmpfs(target: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
        capture_output=True,
    )
    return done.returncode == 0


def _unmount(target: Path) -> None:
    subprocess.run(["umount", "-l", str(target)], capture_output=True)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    # Unbuffered: a buffered file keeps what the full disk refused and writes it again
    # when it is closed, which then fails with ENOSPC outside the loop below (the cause
    # of this test's occasional failures).
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
    return filler


async def test_a_full_disk_pauses_the_run_and_never_corrupts_the_file(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "8m"):
        pytest.skip("needs root to mount a small tmpfs for the database")
    try:
        with ChaosLLM() as llm:
            url = f"sqlite:///{disk / 'navi.db'}"
            async with single_server(tmp_path, llm, database_url=url) as server:
                text = spec_line("full1", steps=5, calls=2, sleep=0.2)
                async with watched_run(server, text) as watcher:
                    probe = LogProbe(url)
                    assert await wait_for_moment(probe, [watcher.session_id], "mid-tool", 20)
                    filler = await anyio.to_thread.run_sync(_fill, disk)
                    with anyio.fail_after(20):  # until a write has failed
                        while "disk is full" not in _log_text(server):
                            await anyio.sleep(0.1)
                    filler.unlink()
                    with anyio.fail_after(60):
                        await watcher.ended.wait()
                logs_text = _log_text(server)
            logs = await read_logs(url, [watcher.session_id])
            assert _integrity(disk / "navi.db") == "ok"
    finally:
        _unmount(disk)
    assert "database or disk is full" in logs_text
    findings = check(logs, server.config.effects, [watcher])
    assert findings.problems == [], findings.problems
    assert logs[watcher.session_id][-1].type == "run.completed"
