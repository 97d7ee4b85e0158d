from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import tiers

POSTGRES_ENV = "NAVI_TEST_POSTGRES_URL"


@pytest.fixture(scope="session", autouse=True)
def navi_session_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The same for servers a session-wide fixture starts before any test's own."""
    before = os.environ.get("NAVI_DATA_DIR")
    os.environ["NAVI_DATA_DIR"] = str(tmp_path_factory.mktemp("navi-session-data"))
    yield
    if before is None:
        os.environ.pop("NAVI_DATA_DIR", None)
    else:
        os.environ["NAVI_DATA_DIR"] = before


@pytest.fixture(autouse=True)
def navi_data_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test's Navi keeps its data folder (NAVI_DATA_DIR, inherited by the `navi
    serve` processes tests start) in a temporary folder, never ~/.local/share/navi."""
    path = tmp_path_factory.mktemp("navi-data")
    monkeypatch.setenv("NAVI_DATA_DIR", str(path))
    return path


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(
            f"PostgreSQL tests need {POSTGRES_ENV} (e.g. postgresql://postgres@127.0.0.1:5432/test)"
        )
    return url


@pytest.fixture(scope="session")
def postgres_url(postgres_server_url: str) -> Iterator[str]:
    """A fresh database for this test session, dropped at the end."""
    from tests.support.postgres import fresh_database

    with fresh_database(postgres_server_url) as url:
        yield url


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every ``async def`` test runs on anyio (asyncio backend) without a marker; the
    tests that start processes, servers or browsers get ``slow`` (tests/support/tiers.py)."""
    import inspect

    for item in items:
        func = getattr(item, "function", None)
        if func is not None and inspect.iscoroutinefunction(func):
            item.add_marker(pytest.mark.anyio)
    tiers.mark_slow_tests(items)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    tiers.watch_processes(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """A fast-tier test that started a process fails (tests/support/tiers.py)."""
    yield
    started = tiers.fast_test_started()
    if started:
        pytest.fail(
            "this test is in the fast tier but started a process; mark it (or its module) "
            "`slow`:\n  " + "\n  ".join(started),
            pytrace=False,
        )


@pytest.fixture
def navi_server(tmp_path: Path) -> Iterator[Any]:
    """A real Navi server on 127.0.0.1 with the fake LLM server (``.url``, ``.fake_llm``)."""
    from tests.support.navi_server import navi_server_for

    with navi_server_for(tmp_path) as running:
        yield running
