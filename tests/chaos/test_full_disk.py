"""A full disk under a real ``navi serve`` whose database *and* log (its stderr) share
a small tmpfs: ``/health`` says the storage is full, a REST message answers 507 with a
clear message (not silence, not 500), the server lives on (its session actors restarted with back-off), and once
space is freed ``/health`` is ok again and a new message runs."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest

from tests.chaos.harness import ChaosLLM, create_session, single_server
from tests.chaos.llm import spec_line
from tests.chaos.test_sqlite_faults import _fill, _mount_tmpfs, _unmount


async def _health(http: httpx.AsyncClient) -> dict[str, object]:
    response = await http.get("/health")
    assert response.status_code == 200
    body: dict[str, object] = response.json()
    return body


async def test_a_full_disk_is_said_and_passes_once_space_is_freed(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "8m"):
        pytest.skip("needs root to mount a small tmpfs for the database")
    try:
        with ChaosLLM() as llm:
            url = f"sqlite:///{disk / 'navi.db'}"
            async with (
                single_server(disk, llm, database_url=url) as server,
                httpx.AsyncClient(base_url=server.url, timeout=30) as http,
            ):
                session_id = await create_session(server.url)
                post = f"/sessions/{session_id}/messages"
                assert (await _health(http))["storage"] == "ok"
                filler = await anyio.to_thread.run_sync(_fill, disk)
                refused = await http.post(post, json={"content": spec_line("d1", steps=1)})
                assert refused.status_code == 507, refused.text
                assert "storage is full" in refused.json()["error"]
                health = await _health(http)
                assert health["storage"] == "full" and health["status"] == "degraded"
                assert "/" not in str(health)  # public: no paths
                again = await http.post(post, json={"content": spec_line("d2", steps=1)})
                assert again.status_code == 507, again.text
                filler.unlink()
                assert (await _health(http))["storage"] == "ok"
                # The refused run resumes (its actor restarted, recovery continues it); then a new message runs.
                with anyio.fail_after(60):
                    while True:
                        done = await http.post(post, json={"content": spec_line("d3", steps=1)})
                        if done.status_code != 409:
                            break
                        await anyio.sleep(0.2)
                assert done.status_code == 200, done.text
                assert done.json()["status"] == "completed"
                assert server.alive
    finally:
        _unmount(disk)
