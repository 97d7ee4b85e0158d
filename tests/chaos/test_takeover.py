"""Two real ``navi serve`` nodes on one PostgreSQL: a client on each, messages sent to
the node that does not run the session (they reach the owner through the durable
inbox; a queued one too), the owner SIGKILLed mid-run, and the runs finishing on the
survivor while both clients watch. (The frozen owner: test_takeover_frozen.py, a file
of its own so that under ``--dist loadfile`` the two long scenarios run on two workers.)"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.chaos.harness import ChaosLLM, ServerConfig, install_tools
from tests.chaos.scenario import takeover

pytestmark = pytest.mark.postgres


async def test_the_survivor_takes_over_and_finishes_the_runs(tmp_path: Path, chaos_db: str) -> None:
    tools, effects = install_tools(tmp_path)
    with ChaosLLM() as llm:
        config = ServerConfig(tmp_path, chaos_db, llm.url, effects, tools)
        with anyio.fail_after(120):
            result = await takeover(config, sessions=3, steps=6, sleep=0.2)
    findings = result.findings
    assert findings.problems == [], findings.problems
    assert findings.runs == findings.runs_finished == 7  # 3, 3 queued, a subagent
    assert findings.events_lost == 0 and findings.duplicate_effects == 0
    assert result.b_watched_live, "the client on B saw nothing of the run on A"
    assert result.pids_a > 0 and result.pids_b > 0, "the runs did not move from A to B"
    assert result.takeovers and result.takeovers[0] > 0
