"""The steps of ``Navi.open`` (navi/app.py): the registries, the first backend, the
session dependencies, the background tasks and the shutdown."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import anyio
import structlog
from anyio.abc import TaskGroup

from events.store import EventStore
from navi.accounts import Users
from navi.blobs import BlobStore
from navi.cluster import NodePlacement
from navi.config import Settings
from navi.ids import new_id
from navi.llm.auto import AutoBackend
from navi.llm.base import LLMBackend
from navi.llm.connection import Connection, KeyFile, connection_settings, verify
from navi.llm.errors import LLMError
from navi.llm.missing import MissingBackend
from navi.llm.selection import PROBE_TIMEOUT, select_backend
from navi.llm.settings import LLMSettingsError
from navi.mcp import McpManager
from navi.mcp.oauth import oauth_places
from navi.mcp.sandbox import sandbox_places
from navi.memory import MemoryService, MemoryWorker
from navi.run.compression import CompressionWorker
from navi.run.context_builder import ContextBuilder
from navi.run.driver import RunDeps
from navi.run.limiter import RunLimiter
from navi.run.workers import Worker
from navi.session.actor import SessionDeps
from navi.session_tools import SessionTools
from navi.user_settings import SERVER, SettingsService
from profiles import ProfileRegistry
from tools import ToolRegistry, create_registry

if TYPE_CHECKING:
    from navi.app import Navi

log = structlog.get_logger(__name__)

# How long start-up waits for the MCP servers before resuming interrupted runs.
MCP_RESUME_WAIT_S = 5.0


def registries(
    settings: Settings, env: Mapping[str, str], users: Users | None
) -> tuple[Users, ProfileRegistry, ToolRegistry]:
    """Who may use which tools (default: those of the settings), the profiles of the
    environment (a bad one logged, not fatal) and the tools."""
    users = users or Users.load(
        api_token=settings.api_token,
        users_file=settings.users_file,
        watch=settings.users_file_watched,
    )
    profiles = ProfileRegistry.from_environ(dict(env))
    for problem in profiles.errors:
        log.warning("profile.invalid", path=str(problem.path), problem=str(problem))
    return users, profiles, create_registry(settings.tools)


def mcp_manager(settings: Settings, tools: ToolRegistry) -> McpManager:
    """The MCP servers of ``mcp.json``: sandboxed where their entry says, signed in with
    the tokens kept in the data folder."""
    return McpManager(
        tools,
        settings.mcp_config_path,
        timeout_s=settings.tools.default_timeout_s,
        places=sandbox_places(settings),
        oauth=oauth_places(settings),
    )


async def opening_backend(
    settings: Settings, user_settings: SettingsService, backend: LLMBackend | None
) -> LLMBackend:
    """The given backend, else the one to start with. The connection an admin saved on
    the settings page wins over the environment."""
    saved = await saved_connection(settings, user_settings)
    return backend or await first_backend(settings, saved)


async def first_backend(settings: Settings, saved: Connection) -> LLMBackend:
    """The backend at start-up: the connection saved on the settings page, if any and it
    can be used, else as the environment says (a bad saved one must not keep Navi down),
    else a :class:`MissingBackend` that says how to connect one (no LLM must not either)."""
    if saved.kind or saved.url:
        try:
            chosen = connection_settings(settings.llm, saved)
            try:  # as when it was saved (an OpenAI-compatible server's first model)
                return (await verify(chosen))[0]
            except LLMError:  # down for now: as the settings say, it may come back
                return await select_backend(chosen)
        except (LLMError, LLMSettingsError) as exc:
            log.warning("llm.saved_connection_unusable", url=saved.url, error=str(exc))
    try:
        return await select_backend(settings.llm)
    except LLMError as exc:  # no LLM at all: Navi starts, and says how to connect one
        log.warning("llm.none_usable", error=exc.message)
        if settings.llm.backend != "auto":  # embedded, not installed: Settings cannot help
            return MissingBackend(exc.message, num_ctx=settings.llm.num_ctx, how="")
        missing = MissingBackend(exc.message, num_ctx=settings.llm.num_ctx)
        # Ollama is asked again before new turns, as after a fall-back to the embedded model.
        return AutoBackend(missing, settings.llm, probe_timeout=PROBE_TIMEOUT)


async def saved_connection(settings: Settings, user_settings: SettingsService) -> Connection:
    """The connection saved on the settings page (its key from the key file)."""
    server = await user_settings.get(SERVER)
    key = KeyFile(settings.llm_key_path).read() if server.api_key_hint else ""
    return Connection(kind=server.backend_type, url=server.backend_url, api_key=key)


def session_deps(
    settings: Settings,
    *,
    store: EventStore,
    profiles: ProfileRegistry,
    tools: ToolRegistry,
    users: Users,
    memory: MemoryService,
    memory_worker: MemoryWorker,
    blobs: BlobStore,
    user_settings: SettingsService,
    session_tools: SessionTools,
    workers: tuple[Worker, ...],
    clock: object,
    navi: Callable[[], Navi],
) -> SessionDeps:
    """What sessions and their runs use; ``navi``: the Navi they belong to, made after
    them (asked for its backends and context windows only once it exists)."""
    run_deps = RunDeps(
        settings=settings,
        profiles=profiles,
        tools=tools,
        builder=ContextBuilder(profiles, tools, memory.summary_message, blobs),
        backend_for=lambda p: navi().backend_for(p),
        files_root=settings.files_root,
        users=users,
        blobs=blobs,
        tool_hooks=session_tools.hooks,
        context_window=lambda p: navi().context_window(p),
        user_settings=user_settings.get,
        live_runs=RunLimiter(settings.max_live_runs),
    )
    # Compression first: a later worker sees the compressed context. The memory
    # worker is told the run ended, to read the session once it has been quiet.
    post_turn: tuple[Worker, ...] = (
        CompressionWorker(run_deps),
        *workers,
        memory_worker.after_run,
    )
    return SessionDeps(
        store=store,
        run=run_deps,
        new_id=new_id,
        clock=clock,  # type: ignore[arg-type]
        workers=post_turn,
        blobs=blobs,
    )


async def start_tasks(
    navi: Navi, tg: TaskGroup, placement: NodePlacement, mcp: McpManager, *, background: bool
) -> None:
    """Resume interrupted runs (if the settings say so) and start the placement; with
    ``background``, also the MCP servers, the memory sweeps and the tools' hot reload."""
    settings = navi.settings
    if background:
        # Each server starts in a task of its own: none delays start-up for
        # long. A run resumed after a crash needs their tools (an idempotent
        # one is re-run): they get a few seconds to connect first.
        await tg.start(mcp.run)
        if settings.resume_on_start:
            await mcp.wait_started(MCP_RESUME_WAIT_S)
    if settings.resume_on_start:
        await navi.sessions.resume_all()
    tg.start_soon(functools.partial(placement.serve, background=background))
    if background:
        tg.start_soon(navi.memory_worker.run_periodic)
        tg.start_soon(navi.tools.watch)


async def close_all(navi: Navi, blobs: BlobStore, first: LLMBackend, *, ours: bool) -> None:
    """Close the tools, the blob store and the backends; ``ours``: the backends Navi
    made (the first, and any a new URL replaced) too. Shielded: it runs on cancel."""
    with anyio.CancelScope(shield=True):
        await navi.tools.aclose()
        blobs.close()
        for other in navi._backends.values():
            await other.aclose()
        if ours:
            for used in {id(b): b for b in (first, *navi._retired, navi.backend)}.values():
                await used.aclose()
