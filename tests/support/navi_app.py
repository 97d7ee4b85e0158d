"""A real ``Navi`` for tests: SQLite (or any store) in a temp folder, a fake LLM (in the
process, or the HTTP server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec

from events.envelope import Recorded
from events.factory import store_for_url
from events.store import EventStore
from events.types import TERMINAL_RUN_EVENTS, FileRef
from navi.app import Navi
from navi.config import Settings
from navi.llm.ollama import OllamaBackend
from navi.llm.settings import LLMSettings
from projections.invariants import log_problems
from tests.support.fake_backend import FakeLLM
from tools import ToolSettings


def navi_settings(tmp_path: Path, fake_url: str, **overrides: Any) -> Settings:
    llm = LLMSettings(
        backend="ollama",
        ollama_host=fake_url,
        default_model="fake-model:latest",
        num_ctx=8192,
        first_chunk_timeout=10.0,
        chunk_timeout=10.0,
    )
    tools = ToolSettings(tools_dir=str(tmp_path / "user_tools"), terminal_allowed_commands=("*",))
    base = Settings(
        database_url=f"sqlite:///{tmp_path / 'navi.db'}",
        session_files_dir=str(tmp_path / "files"),
        resume_on_start=False,
        llm_retry_backoff_s=0.01,
        # A test rig: no prompts, unless a test asks for the approvals it checks.
        tool_approval="auto",
        llm=llm,
        tools=tools,
    )
    return msgspec.structs.replace(base, **overrides)


@asynccontextmanager
async def open_navi(
    settings: Settings,
    *,
    store: EventStore | None = None,
    llm: FakeLLM | None = None,
    **kw: Any,
) -> AsyncIterator[Navi]:
    """Navi on ``settings``; its LLM answers from ``llm`` (the in-process fake) if given,
    else over HTTP from the server at ``settings.llm.ollama_host``."""
    backend = llm.backend(settings.llm) if llm is not None else OllamaBackend(settings.llm)
    kw.setdefault("background", False)
    try:
        async with Navi.open(settings, backend=backend, store=store, **kw) as navi:
            yield navi
            await check_every_log(navi.store)
    finally:
        await backend.aclose()


async def check_every_log(store: EventStore) -> None:
    """Every log the store holds keeps the invariants (projections/invariants.py)."""
    for stream_id in await store.stream_heads():
        problems = log_problems(await store.read(stream_id))
        assert not problems, f"log {stream_id}: {problems}"


def check_every_log_in(database_url: str) -> None:
    """``check_every_log`` on the database a stopped server wrote (SQLite only: a
    PostgreSQL database is shared by the tests)."""
    if not database_url.startswith("sqlite"):
        return

    async def check() -> None:
        async with store_for_url(database_url) as store:
            await check_every_log(store)

    # In a thread of its own: the caller may be inside an event loop (an async test).
    with ThreadPoolExecutor(1) as pool:
        pool.submit(anyio.run, check).result()


async def run_stream(
    navi: Navi,
    session_id: str,
    text: str,
    images: tuple[str, ...] = (),
    files: tuple[FileRef, ...] = (),
) -> AsyncIterator[Recorded]:
    """Start a turn and yield its events as they become durable, up to its end."""
    reply = await navi.send(session_id, text, images, files)
    async for record in navi.store.subscribe(session_id, after_seq=reply.after_seq):
        yield record
        if record.run_id == reply.run_id and record.type in TERMINAL_RUN_EVENTS:
            return
