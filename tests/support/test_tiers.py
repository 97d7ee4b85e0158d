"""The tiers: what makes a test slow by its code, and the check that catches the rest."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tests.support import tiers
from tests.support.navi_server import navi_server_for


class FakeItem:
    """What the check reads of a collected test: its ``slow`` marker, or none."""

    def __init__(self, *, slow: bool) -> None:
        self.slow = slow
        self.keywords = {"slow": True} if slow else {}

    def get_closest_marker(self, name: str) -> Any:
        return pytest.mark.slow.mark if self.slow and name == "slow" else None


def runs_a_process() -> None:
    subprocess.run(["true"], check=True)


def through_a_helper() -> None:
    runs_a_process()


def through_a_shared_fixture_helper(tmp_path: Any) -> None:
    with navi_server_for(tmp_path):
        pass


def imports_its_starter_inside() -> None:
    from tests.support.fake_llm import FakeLLMProcess

    FakeLLMProcess()


def pure() -> int:
    return sum(range(10))


@pytest.mark.parametrize(
    ("function", "reason"),
    [
        (runs_a_process, "starts a process (subprocess)"),
        (through_a_helper, "starts a process (subprocess)"),
        (through_a_shared_fixture_helper, "serves HTTP in a thread (uvicorn"),
        (imports_its_starter_inside, "starts a process"),
        (pure, None),
    ],
)
def test_a_test_is_slow_by_what_its_code_reaches(function: Any, reason: str | None) -> None:
    found = tiers._Scan().function(function)
    if reason is None:
        assert found is None
    else:
        assert found is not None and found.startswith(reason), found


def test_a_process_started_by_a_fast_test_is_recorded() -> None:
    tiers.watch_processes(FakeItem(slow=False))  # type: ignore[arg-type]
    runs_a_process()
    started = tiers.fast_test_started()
    assert started == ["subprocess.Popen: true"]
    assert tiers.fast_test_started() == []  # reported once

    tiers.watch_processes(FakeItem(slow=True))  # type: ignore[arg-type]
    runs_a_process()
    assert tiers.fast_test_started() == []


def test_the_sandbox_probe_is_not_the_tests_own_process() -> None:
    from tools.sandbox_status import sandbox_status

    sandbox_status.cache_clear()
    tiers.watch_processes(FakeItem(slow=False))  # type: ignore[arg-type]
    sandbox_status()  # finds bwrap, makes the sandbox user as root, runs `true` in it
    assert tiers.fast_test_started() == []
