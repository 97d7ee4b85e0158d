"""``Navi``: the running application — store, actors, profiles, tools and LLM together,
and the entry points everything else (server, CLI, subagents) uses."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import structlog

from actors import ActorSystem
from events.envelope import Recorded
from events.factory import store_for_url
from events.store import EventStore
from events.types import (
    TERMINAL_RUN_EVENTS,
    CallOptions,
    FileRef,
    RunCompleted,
    RunFailed,
    RunMode,
    SettingsUpdated,
    tag_of,
)
from navi.accounts import Users
from navi.app_startup import (
    close_all,
    mcp_manager,
    opening_backend,
    registries,
    session_deps,
    start_tasks,
)
from navi.blobs import BlobStore
from navi.cluster import open_placement
from navi.config import Settings
from navi.ids import new_id, session_folder
from navi.llm.auto import AutoBackend
from navi.llm.base import LLMBackend
from navi.llm.connection import Connection, KeyFile, connection_settings, mask_key, verify
from navi.llm.errors import LLMError
from navi.llm.selection import select_backend
from navi.mcp import McpManager
from navi.memory import MemoryService, MemoryWorker, memory_tools
from navi.replay.fork_upgrade import copy_linked_forks
from navi.run.limiter import RunLimiter
from navi.run.workers import Worker
from navi.session import messages as m
from navi.session.errors import SessionError
from navi.session.manager import SessionManager
from navi.session_tools import SessionTools
from navi.user_settings import SERVER, SettingsService
from profiles import Profile, ProfileRegistry
from tools import ToolRegistry

log = structlog.get_logger(__name__)


class RunFailedError(SessionError):
    status = 502


@dataclass
class Navi:
    settings: Settings
    store: EventStore
    profiles: ProfileRegistry
    tools: ToolRegistry
    backend: LLMBackend
    sessions: SessionManager
    memory: MemoryService
    memory_worker: MemoryWorker
    blobs: BlobStore | None = None
    # The MCP servers of mcp.json (navi/mcp), running while Navi runs in the background.
    mcp: McpManager | None = None
    clock: object = time.time
    _backends: dict[tuple[str, str | None], LLMBackend] = field(default_factory=dict)
    # The context window of each profile's model, learnt from its backend (backend_for).
    _windows: dict[str, int] = field(default_factory=dict)
    # What users saved on the settings page (navi/user_settings.py).
    user_settings: SettingsService | None = None
    # Backends a new backend URL replaced: runs already streaming finish on them.
    _retired: list[LLMBackend] = field(default_factory=list)

    # ------------------------------------------------------------------ start-up

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        settings: Settings,
        *,
        env: Mapping[str, str] | None = None,
        backend: LLMBackend | None = None,
        store: EventStore | None = None,
        workers: tuple[Worker, ...] = (),
        clock: object = time.time,
        background: bool = True,
        users: Users | None = None,
    ) -> AsyncIterator[Navi]:
        """Open everything; with ``background``, also run the memory worker's sweeps and
        the user-tool hot reload (the server does; one-shot CLI commands do not).
        ``users``: who may use which tools (default: those of the settings)."""
        users, profiles, tools = registries(settings, env or {}, users)
        store = store or store_for_url(settings.database_url, db_timeout_s=settings.db_timeout_s)
        # The placement (navi/cluster) outlives the actors: on PostgreSQL it holds the
        # locks that say this node owns their sessions.
        async with (
            store,
            open_placement(store, settings) as placement,
            ActorSystem() as system,
            anyio.create_task_group() as tg,
        ):
            navi: Navi
            await copy_linked_forks(store)  # once: forks made before forks were copies
            user_settings = SettingsService(store)
            llm = await opening_backend(settings, user_settings, backend)
            memory = MemoryService(store)
            blobs = BlobStore(settings.blobs_root, quota_bytes=settings.user_quota_mb * 1024 * 1024)
            mcp = mcp_manager(settings, tools)
            memory_worker = MemoryWorker(memory, llm, idle_seconds=settings.memory_extract_after_s)
            session_tools = SessionTools(profiles, store, new_id)
            deps = session_deps(
                settings,
                store=store,
                profiles=profiles,
                tools=tools,
                users=users,
                memory=memory,
                memory_worker=memory_worker,
                blobs=blobs,
                user_settings=user_settings,
                session_tools=session_tools,
                workers=workers,
                clock=clock,
                navi=lambda: navi,
            )
            navi = cls(
                settings=settings,
                store=store,
                profiles=profiles,
                tools=tools,
                backend=llm,
                sessions=SessionManager(system, deps),
                memory=memory,
                memory_worker=memory_worker,
                blobs=blobs,
                mcp=mcp,
                clock=clock,
                user_settings=user_settings,
            )
            for tool in [*session_tools.tools(), *memory_tools(memory)]:
                tools.register_builtin(tool)
            placement.attach(navi.sessions)
            try:  # the window of the default profile's model, for the context meter
                await navi.backend_for(profiles.get(profiles.default_id))
            except LLMError as exc:  # its backend fails at its first call, as before
                log.warning("llm.default_profile_backend", error=exc.message)
            await start_tasks(navi, tg, placement, mcp, background=background)
            try:
                yield navi
            finally:
                tg.cancel_scope.cancel()
                await close_all(navi, blobs, llm, ours=backend is None)

    async def backend_for(self, profile: Profile) -> LLMBackend:
        """The default backend, unless the profile names another one (its model's
        context window learnt on the way: cached by the backend)."""
        backend = await self._backend_for(profile)
        self._windows[profile.id] = await backend.context_window(profile.model, profile.num_ctx)
        return backend

    async def use_connection(self, connection: Connection) -> list[str]:
        """Talk to the LLM server of ``connection`` from the next call on (kind and URL
        "": the environment's again), chosen as at start-up, once it listed its models
        (their names are returned); the connection is kept in the server's settings,
        its key in the key file. Raises ``LLMSettingsError`` for a URL that is not one,
        ``LLMError`` (the exact reason) for a server that cannot be used: nothing is
        saved then."""
        new, models = await verify(connection_settings(self.settings.llm, connection))
        if self.user_settings is not None:
            KeyFile(self.settings.llm_key_path).write(connection.api_key)
            change = SettingsUpdated(
                backend_url=connection.url,
                backend_type=connection.kind,
                api_key_hint=mask_key(connection.api_key),
            )
            await self.user_settings.update(SERVER, change)
        self._retired.append(self.backend)
        self.backend = new
        self._windows.clear()
        await self.backend_for(self.profiles.get(self.profiles.default_id))
        return [model.name for model in models]

    @property
    def live_runs(self) -> RunLimiter:
        """The node's limit on runs streaming at once, and who waits (NAVI_MAX_LIVE_RUNS)."""
        return self.sessions.deps.run.live_runs

    def context_window(self, profile: Profile | None = None) -> int:
        """The context window, in tokens, of the model the profile's turns use (the
        default profile's if none), as its backend told it."""
        default = self.profiles.default_id
        profile_id = profile.id if profile is not None else default
        known = self._windows.get(profile_id) or self._windows.get(default)
        if known:
            return known
        asked = profile.num_ctx if profile is not None else None
        return asked or self.settings.llm.num_ctx

    async def _backend_for(self, profile: Profile) -> LLMBackend:
        kind = profile.llm_backend
        if kind is None or kind == self.backend.name:
            return self.backend
        key = (kind, profile.model)
        if key not in self._backends:
            self._backends[key] = await select_backend(
                self.settings.llm,
                backend=kind,  # type: ignore[arg-type]
                model=profile.model,
            )
        return self._backends[key]

    # ------------------------------------------------------------------ entry points

    async def create_session(
        self,
        profile_id: str | None = None,
        *,
        user_id: str = "local",
        title: str = "",
        origin: str = "",
    ) -> str:
        profile = self.profiles.get(profile_id or self.profiles.default_id)
        return await self.sessions.create(
            m.Create(profile_id=profile.id, user_id=user_id, title=title, origin=origin)
        )

    async def send(
        self,
        session_id: str,
        text: str,
        images: tuple[str, ...] = (),
        files: tuple[FileRef, ...] = (),
        *,
        queue: bool = False,
        mode: RunMode = "stream",
        call_options: CallOptions | None = None,
    ) -> m.RunStartedReply:
        # A new turn (not a subagent's, whose parent is mid-run, nor one queued behind a
        # running turn): if Ollama has come up since start-up, this turn and the next
        # use it.
        if mode != "ephemeral" and not queue:
            await self.reprobe(now=False)
        reply: m.RunStartedReply = await self.sessions.ask(
            session_id,
            m.Send(
                text=text,
                images=images,
                files=files,
                queue=queue,
                mode=mode,
                call_options=call_options,
            ),
        )
        return reply

    async def reprobe(self, *, now: bool = True) -> bool:
        """Under ``auto`` on the embedded model (or none): ask Ollama again (``now``, else
        only when ``NAVI_LLM_REPROBE_SECONDS`` have passed); True when Navi now uses it."""
        auto = self.backend if isinstance(self.backend, AutoBackend) else None
        if auto is None or not await auto.before_turn(now=now):
            return False
        self._windows.clear()
        await self.backend_for(self.profiles.get(self.profiles.default_id))
        return True

    async def stop(self, session_id: str, reason: str = "user") -> bool:
        stopped: bool = await self.sessions.ask(session_id, m.StopRun(reason=reason))
        return stopped

    async def try_again(self, session_id: str) -> bool:
        """Go on now with a run that waits for the model's server (``waiting_for_llm``)."""
        asked: bool = await self.sessions.ask(session_id, m.TryAgain())
        return asked

    async def decide(
        self,
        session_id: str,
        call_id: str,
        *,
        approved: bool,
        scope: str = "once",
        by: str = "",
        reason: str = "",
        stream_id: str = "",
    ) -> str:
        """A person's decision on a tool call waiting for approval (in this session or
        one of its running subagents: ``stream_id`` says which; without it, the one
        waiting call with that id); answers the stream id where it was recorded."""
        decision = m.Decide(
            call_id, approved, scope=scope, by=by, reason=reason, stream_id=stream_id
        )
        recorded: str = await self.sessions.ask(session_id, decision)
        return recorded

    async def run(self, session_id: str, text: str) -> str:
        """Run a turn without streaming (no planning) and return its final text."""
        reply = await self.send(session_id, text, mode="run")
        end = await self.wait_for_end(session_id, reply)
        if isinstance(end.event, RunFailed):
            raise RunFailedError(end.event.error)
        return end.event.content if isinstance(end.event, RunCompleted) else ""

    async def wait_for_end(self, session_id: str, reply: m.RunStartedReply) -> Recorded:
        run_id = reply.run_id
        batches = self.store.subscribe_batches(
            session_id, after_seq=reply.after_seq, wake_on=TERMINAL_RUN_EVENTS
        )
        async with aclosing(batches):
            async for batch in batches:
                for record in batch:
                    if record.run_id == run_id and tag_of(record.event) in TERMINAL_RUN_EVENTS:
                        return record
        raise AssertionError("unreachable: a subscription never ends")

    def files_dir(self, session_id: str) -> Path:
        """The session's files folder; ``InvalidId`` unless the id is a UUID."""
        return session_folder(self.settings.files_root, session_id)
