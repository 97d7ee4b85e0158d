"""Carrying out the tool calls of a step: which run now, which may not run at all, and
each call with the context its tool gets.

A call may not run when a crash left it open and its tool is not idempotent (it becomes
``tool.failed(reason="interrupted")``: it may or may not have happened), when the
profile or the user's grants do not allow it (navi/run/permissions.py), or when its
approval policy denies it or the user declined it (navi/run/approval.py). Either way
the failure is an outcome, held by the driver like a result. A call whose policy asks
runs only once a person approved it: the driver asks first (``must_ask``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog

from events.types import (
    Event,
    NoteDeleted,
    NoteSaved,
    TodoItem,
    TodoUpdated,
    ToolApprovalRequested,
    ToolCall,
    ToolCompleted,
    ToolFailed,
    ToolStarted,
)
from navi.blobs import keep_tool_image
from navi.ids import session_folder
from navi.quota import StorageUse, counted_writes
from navi.run import approval, permissions
from navi.run.host import Commit, RunDeps, RunHost, active_profile, is_subagent
from profiles import Profile
from tools import ProfileInfo, ToolContext, ToolResult

if TYPE_CHECKING:
    from navi.session.state import SessionState

log = structlog.get_logger(__name__)

INTERRUPTED = (
    "Navi was restarted while this call was running, so it may or may not have happened. "
    "Check its effect before trying it again."
)


class ToolStep:
    def __init__(self, host: RunHost, deps: RunDeps, *, in_doubt: set[str]) -> None:
        self.host = host
        self.deps = deps
        self.state = host.state
        self.log = log.bind(session_id=host.session_id)
        # Calls that were open when the run was recovered follow the resume rules.
        self.in_doubt = in_doubt
        self._info: tuple[Profile, ProfileInfo] | None = None  # of the profile last used
        self._files: tuple[str, Path, str] | None = None  # owner, files folder, its name
        # The user's own approval defaults (their settings page), read once per run by
        # the driver.
        self.user_policy: Mapping[str, str] = {}

    async def run(self, commit: Commit, open_calls: Sequence[ToolCall]) -> list[Event]:
        """Run the next open call, or the leading calls that may run side by side;
        returns the outcomes for the driver to hold.

        A call that may not run: its ``tool.failed`` is the outcome, and nothing runs
        (the table comes back for the others, and their ``tool.started`` goes into the
        failure's commit). One call: its result. Several: each result is recorded as
        soon as it is in (a subagent may take an hour, its sibling a second)."""
        batch = self._concurrent_batch(open_calls) or list(open_calls[:1])
        refused = [r for r in map(self._refusal, batch) if r is not None]
        if refused:
            return list(refused)
        if not await commit([ToolStarted(call_id=c.id, name=c.name) for c in batch]):
            return []
        if len(batch) == 1:
            return [await self._execute(batch[0])]
        async with anyio.create_task_group() as tg:
            for call in batch:
                tg.start_soon(self._execute_and_record, call)
        return []

    def _concurrent_batch(self, calls: Sequence[ToolCall]) -> list[ToolCall]:
        """Leading open calls of tools that may run side by side (``concurrent``), e.g.
        several ``spawn_agent`` calls: subagents work in parallel. Fewer than two: none.
        A call that must wait for approval ends the batch."""
        batch: list[ToolCall] = []
        for call in calls:
            if not getattr(self.deps.tools.get(call.name), "concurrent", False):
                break
            if batch and self._undecided_ask(call):
                break
            batch.append(call)
        return batch if len(batch) > 1 else []

    # ------------------------------------------------------------------ approvals

    def policy(self, call: ToolCall) -> approval.Policy:
        state = self.state
        return approval.policy_for(
            call,
            tools=self.deps.tools,
            profile=active_profile(state, self.deps),
            operator=self.deps.settings.tool_approval,
            user=self.user_policy,
            approved_tools=state.progress.approved_tools,
        )

    def must_ask(self, open_calls: Sequence[ToolCall]) -> bool:
        """The next open call waits for a person's decision that it does not have yet."""
        return bool(open_calls) and self._undecided_ask(open_calls[0])

    def approval_request(self, call: ToolCall) -> ToolApprovalRequested:
        return ToolApprovalRequested(
            call_id=call.id,
            name=call.name,
            arguments=call.arguments,
            policy=self.policy(call).source,
        )

    def _undecided_ask(self, call: ToolCall) -> bool:
        """Its policy asks, no one decided yet, and it could run if approved (a call the
        profile or the user's grants refuse is refused at once, never asked about)."""
        if self.state.progress.decision_of(call.id) is not None:
            return False
        return self.policy(call).approval == "ask" and self._permission_refusal(call) is None

    def _refusal(self, call: ToolCall) -> ToolFailed | None:
        """The ``tool.failed`` of a call that may not run (see the module doc), or None."""
        if call.id in self.in_doubt:
            self.in_doubt.discard(call.id)
            if not self.deps.tools.is_idempotent(call.name, call.arguments):
                return ToolFailed(
                    call_id=call.id, name=call.name, reason="interrupted", error=INTERRUPTED
                )
            self.log.info("tool.rerun_idempotent", tool=call.name, call_id=call.id)
        decided = self._approval_refusal(call)
        if decided is not None:
            return decided
        refused = self._permission_refusal(call)
        if refused is None:
            return None
        self.log.warning("tool.refused", tool=call.name, call_id=call.id, why=refused)
        return ToolFailed(call_id=call.id, name=call.name, error=refused)

    def _permission_refusal(self, call: ToolCall) -> str | None:
        return permissions.refusal(
            self.deps.builder,
            self.deps.users,
            call.name,
            active_profile(self.state, self.deps),
            subagent=is_subagent(self.state),
            user_id=self.state.user_id,
        )

    def _approval_refusal(self, call: ToolCall) -> ToolFailed | None:
        """The ``tool.failed`` of a call its policy denies or a person declined."""
        decision = self.state.progress.decision_of(call.id)
        if decision is not None:
            if decision.approved:
                return None
            if decision.by == "navi" and decision.reason == "timeout":
                timeout = self.deps.settings.approval_timeout_s or 0
                error = approval.TIMED_OUT.format(seconds=timeout)
            else:
                error = approval.denied_message(decision.reason)
            return ToolFailed(call_id=call.id, name=call.name, reason="denied", error=error)
        policy = self.policy(call)
        if policy.approval != "deny":
            return None
        error = approval.POLICY_DENIED.format(source=policy.source)
        return ToolFailed(call_id=call.id, name=call.name, reason="denied", error=error)

    async def _execute(self, call: ToolCall) -> Event:
        blobs, user_id = self.deps.blobs, self.state.user_id
        # The user's storage before the call (a running total: no I/O), and after it,
        # the folder it could write measured: past the quota, the call fails (quota.py).
        before = None if blobs is None else await blobs.astorage(user_id)
        context = self._context(call, before)
        result = await self.deps.tools.execute(call.name, call.arguments, context)
        # An image it returned goes to the blob store; the log keeps a reference.
        result = await keep_tool_image(
            blobs, result, user_id=user_id, session_id=self.host.data_owner.session_id
        )
        if getattr(self.deps.tools.get(call.name), "uses_files", True):
            result = await counted_writes(
                blobs, result, before=before, folder=context.files_dir, user_id=user_id
            )
        return _result_event(call, result)

    async def _execute_and_record(self, call: ToolCall) -> None:
        await self.host.record(await self._execute(call))

    # ------------------------------------------------------------------ a tool's context

    def _context(self, call: ToolCall, storage: StorageUse | None) -> ToolContext:
        state = self.state
        owner = self.host.data_owner
        # A subagent works on its top-level session's files, todo list and notes; its
        # scratchpad stays its own (isolated from its parent and its siblings). A child
        # session run on its own uses the files of the session it names.
        created = state.created
        files_owner = owner.session_id
        if owner is self.host and created is not None and created.parent_stream_id:
            files_owner = created.parent_stream_id
        # A tool that never touches the files folder does not need it made.
        uses_files = getattr(self.deps.tools.get(call.name), "uses_files", True)
        files_dir = self._files_dir(files_owner, make=uses_files)
        hooks = self.deps.tool_hooks(self.host, call.id)
        shared = owner is not self.host
        return ToolContext(
            session_id=self.host.session_id,
            files_dir=files_dir,
            emit=self._emit_shared if shared else self._emit,
            state=SharedToolState(own=state, owner=owner.state) if shared else state,
            user_id=state.user_id,
            stop=self.host.stop_signal,
            settings=self.deps.settings.tools,
            profile=self._profile_info(active_profile(state, self.deps)),
            call_id=call.id,
            spawn=hooks.get("spawn"),
            switch_profile=hooks.get("switch_profile"),
            storage_left=None if storage is None else storage.remaining,
        )

    def _files_dir(self, owner: str, *, make: bool = True) -> Path:
        """The session's files folder; with ``make``, made if missing (checked before
        every call of a tool that uses it: another tool may have removed it)."""
        if self._files is None or self._files[0] != owner:
            path = session_folder(self.deps.files_root, owner)  # a UUID, or InvalidId
            self._files = (owner, path, os.fspath(path))
        _, path, name = self._files
        if make and not os.path.isdir(name):  # one stat, where mkdir(exist_ok) costs two
            path.mkdir(parents=True, exist_ok=True)
        return path

    def _profile_info(self, profile: Profile) -> ProfileInfo:
        if self._info is None or self._info[0] is not profile:
            info = ProfileInfo(
                id=profile.id,
                name=profile.name,
                scratchpad_sections=profile.scratchpad_sections,
                step_validation_enabled=profile.step_validation_enabled,
                tool_network=profile.tool_network,
                allow_private_urls=profile.allow_private_urls,
            )
            self._info = (profile, info)
        return self._info[1]

    async def _emit(self, event: Event) -> None:
        await self.host.record(event)

    async def _emit_shared(self, event: Event) -> None:
        if isinstance(event, TodoUpdated | NoteSaved | NoteDeleted):
            await self.host.data_owner.record(event)
        else:
            await self.host.record(event)


class SharedToolState:
    """What a subagent's tools read: its top-level session's todo list and notes, its
    own scratchpad."""

    def __init__(self, *, own: SessionState, owner: SessionState) -> None:
        self.own = own
        self.owner = owner

    def todo(self) -> Sequence[TodoItem]:
        return self.owner.todo()

    def scratchpad(self) -> Mapping[str, str]:
        return self.own.scratchpad()

    def notes(self) -> Mapping[str, str]:
        return self.owner.notes()


def _result_event(call: ToolCall, result: ToolResult) -> Event:
    if result.success:
        return ToolCompleted(
            call_id=call.id, name=call.name, output=result.output, metadata=result.metadata
        )
    return ToolFailed(
        call_id=call.id,
        name=call.name,
        reason=result.failure_reason or "error",
        error=result.output or result.error or "the tool failed",
    )
