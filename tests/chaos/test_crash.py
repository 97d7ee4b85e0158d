"""SIGKILL a real ``navi serve`` (SQLite) at chosen and random moments of long multi-tool
runs, restart it each time, and check that nothing the clients saw was lost, every run
ended, and no non-idempotent effect happened twice (bench/chaos.py runs it longer)."""

from __future__ import annotations

import random
from pathlib import Path

import anyio

from tests.chaos.harness import ChaosLLM, ServerConfig, install_tools
from tests.chaos.scenario import crash_loop


async def test_sigkill_at_chosen_and_random_moments_loses_nothing(tmp_path: Path) -> None:
    tools, effects = install_tools(tmp_path)
    with ChaosLLM() as llm:
        config = ServerConfig(
            root=tmp_path,
            database_url=f"sqlite:///{tmp_path / 'navi.db'}",
            llm_url=llm.url,
            effects=effects,
            tools=tools,
        )
        with anyio.fail_after(120):
            result = await crash_loop(
                config,
                sessions=3,
                kills=6,
                moments=["mid-stream", "mid-tool", "subagent", "compression", "random", "mid-tool"],
                rng=random.Random(11),
                steps=6,
                sleep=0.2,
            )
    findings = result.findings
    assert result.kills >= 4, result
    assert findings.problems == [], findings.problems
    assert findings.runs_finished == findings.runs >= 4  # 3 sessions and a subagent
    assert findings.events_lost == 0
    assert findings.duplicate_effects == 0
    assert findings.missing_effects == 0
    assert findings.frames_checked > 0
    assert result.recoveries, "no kill found a run in flight"
