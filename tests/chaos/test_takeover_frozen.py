"""Two real ``navi serve`` nodes on one PostgreSQL, the owner frozen (SIGSTOP) mid-run
rather than killed: the survivor takes the runs over after the lease, and the owner,
woken, is refused (test_takeover.py has the killed owner; a file each, so that under
``--dist loadfile`` the two long scenarios run on two workers)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.chaos.harness import ChaosLLM, ServerConfig, install_tools
from tests.chaos.scenario import takeover

pytestmark = pytest.mark.postgres


async def test_a_frozen_owner_is_replaced_and_refused_when_it_wakes(
    tmp_path: Path, chaos_db: str
) -> None:
    """A SIGSTOPped owner keeps its connections open: the server drops its ownership
    connection after the lease (NAVI_DB_TIMEOUT_S), B takes the runs over and ends them;
    A, woken, finds its sessions taken, and its late writes are refused (the epoch)."""
    tools, effects = install_tools(tmp_path)
    with ChaosLLM() as llm:
        config = ServerConfig(
            tmp_path, chaos_db, llm.url, effects, tools, extra_env={"NAVI_DB_TIMEOUT_S": "3"}
        )
        with anyio.fail_after(120):
            result = await takeover(config, sessions=3, steps=6, sleep=0.2, freeze=True)
    findings = result.findings
    assert findings.problems == [], findings.problems
    assert findings.runs == findings.runs_finished == 7
    assert findings.events_lost == 0 and findings.duplicate_effects == 0
    assert result.takeovers and result.takeovers[0] < 10
