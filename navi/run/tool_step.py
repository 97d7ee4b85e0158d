"""Carrying out the tool calls of a step: which run now, which may not run at all, and
each call with the context its tool gets.

A call may not run when a crash left it open and its tool is not idempotent (it becomes
``tool.failed(reason="interrupted")``: it may or may not have happened), when the
profile or the user's grants do not allow it (navi/run/permissions.py), or when its
approval policy denies it or the user declined it (navi/run/approval.py). A call runs
with the profile as granted to the session's owner (navi/grants.py): no LAN, no
sandbox network, no ``auto`` rule of the profile that the account has no grant for. Either way
the failure is an outcome, held by the driver like a result. A call whose policy asks
runs only once a person approved it: the driver asks first (``must_ask``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import msgspec
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
from navi.accounts import User
from navi.blobs import keep_tool_image
from navi.grants import granted_profile
from navi.ids import session_folder
from navi.quota import StorageUse, counted_writes
from navi.run import approval, permissions
from navi.run.host import Commit, RunDeps, RunHost, active_profile, is_subagent
from navi.run.tool_progress import ProgressReporter
from profiles import Profile
from tools import ProfileInfo, ToolContext, ToolResult
from tools.base import CallDescription

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
        # The session's profile, its owner, and the profile as granted to them.
        self._granted: tuple[Profile, User | None, Profile] | None = None
        self._files: tuple[str, Path, str] | None = None  # owner, files folder, its name
        # The user's own approval defaults (their settings page), read once per run by
        # the driver.
        self.user_policy: Mapping[str, str] = {}
        self._described: dict[tuple[str, str], CallDescription] = {}

    async def run(self, commit: Commit, open_calls: Sequence[ToolCall]) -> list[Event]:
        """Run the next open call, or the leading calls that may run side by side;
        returns the outcomes for the driver to hold.

        A call that may not run: what the driver holds (the calls' ``tool.requested``) is
        committed, its ``tool.failed`` is the outcome, and nothing runs (the table comes
        back for the others, and their ``tool.started`` goes into the failure's commit). One call: its result. Several: each result is recorded as
        soon as it is in (a subagent may take an hour, its sibling a second)."""
        batch = self._concurrent_batch(open_calls) or list(open_calls[:1])
        refused = [r for r in map(self._refusal, batch) if r is not None]
        if refused:
            # Their requests are recorded first: a call's outcome never precedes it.
            return list(refused) if await commit(()) else []
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
        return self._policy(call, self.describe(call))

    def _policy(self, call: ToolCall, described: CallDescription) -> approval.Policy:
        state = self.state
        return approval.policy_for(
            call,
            tools=self.deps.tools,
            profile=self._granted_profile(),
            operator=self.deps.settings.tool_approval,
            user=self.user_policy,
            allowances=self.allowances(),
            description=described,
            subagent=is_subagent(state),
        )

    def allowances(self) -> approval.Allowances:
        """What this stream's chat allows: its own folds and its top-level session's."""
        state = self.state
        return approval.Allowances(
            own=state.consent,
            chat=self.host.data_owner.state.consent,
            whole_tools=state.progress.approved_tools,
        )

    def describe(self, call: ToolCall) -> CallDescription:
        """The call in plain words, as its tool tells it (``Tool.describe``): once per
        call and profile (the loop asks about the next call at every pass, and a path's
        resolution is not free)."""
        key = (call.id, self.state.profile.profile_id or "")
        described = self._described.get(key)
        if described is None:
            if len(self._described) >= 64:
                self._described.clear()
            context = self._context(call, make=False)
            described = self.deps.tools.describe(call.name, call.arguments, context)
            self._described[key] = described
        return described

    def must_ask(self, open_calls: Sequence[ToolCall]) -> bool:
        """The next open call waits for a person's decision that it does not have yet."""
        return bool(open_calls) and self._undecided_ask(open_calls[0])

    def approval_request(self, call: ToolCall) -> ToolApprovalRequested:
        """The request as the person sees it: what the call does and where, its risk,
        who asked, and what "for this session" would approve (recorded as shown)."""
        described = self.describe(call)
        policy = self._policy(call, described)
        scope = policy.scope
        return ToolApprovalRequested(
            call_id=call.id,
            name=call.name,
            arguments=call.arguments,
            policy=policy.source,
            summary=described.summary,
            target=described.target,
            risk=described.risk,
            asked_by=policy.asked_by,
            scope_key=scope.key if scope is not None else "",
            scope_label=scope.label if scope is not None else "",
            once_only=scope is None,
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
            arguments=call.arguments,
        )

    def _granted_profile(self) -> Profile:
        """The session's profile as its tools may act for the session's owner: what the
        account has no grant for turned off (navi/grants.py), however the session came
        to be in it (made before a grant was withdrawn, imported, forked)."""
        profile = active_profile(self.state, self.deps)
        user = self.deps.users.get(self.state.user_id)
        cached = self._granted
        if cached is None or cached[0] is not profile or cached[1] is not user:
            cached = self._granted = (profile, user, granted_profile(profile, user))
        return cached[2]

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
        # Its progress goes to the log while it runs (before its outcome, which the
        # driver records after this returns).
        reporter = ProgressReporter(call.id, self.host.stage, running=self._running)
        context = self._context(call, storage=before, progress=reporter)
        try:
            result = await self.deps.tools.execute(call.name, call.arguments, context)
            await reporter.close()
        finally:
            reporter.shut()
        # An image it returned goes to the blob store; the log keeps a reference.
        result = await keep_tool_image(
            blobs, result, user_id=user_id, session_id=self.host.data_owner.session_id
        )
        if getattr(self.deps.tools.get(call.name), "uses_files", True):
            result = await counted_writes(
                blobs, result, before=before, folder=context.files_dir, user_id=user_id
            )
        return _result_event(call, result)

    def _running(self, call_id: str) -> bool:
        progress = self.state.progress
        return call_id in progress.started and call_id not in progress.resolved

    async def _execute_and_record(self, call: ToolCall) -> None:
        await self.host.record(await self._execute(call))

    # ------------------------------------------------------------------ a tool's context

    def _consent(self, call: ToolCall, described: CallDescription) -> approval.CallConsent | None:
        """What the call's web requests may reach as it runs; None: a call without any
        (and with NAVI_TOOL_APPROVAL=auto no call gets one)."""
        operator = self.deps.settings.tool_approval
        if not described.reach:
            return None
        profile = self._granted_profile()
        return approval.CallConsent(
            described.reach,
            self.allowances(),
            explicit=operator != "ask"
            and approval.explicit_auto(call.name, profile, self.user_policy),
            decision=self.state.progress.decision_of(call.id),
        )

    def _context(
        self,
        call: ToolCall,
        *,
        make: bool = True,
        storage: StorageUse | None = None,
        progress: ProgressReporter | None = None,
    ) -> ToolContext:
        """The call's context; ``make``: it runs now (its files folder is made, and its
        web requests get what they may reach), else it is only described. ``storage``:
        the user's storage before the call (what a sandboxed call may still write)."""
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
        files_dir = self._files_dir(files_owner, make=make and uses_files)
        shared = owner is not self.host
        hooks = self.deps.tool_hooks(self.host, call.id) if make else {}
        context = ToolContext(
            session_id=self.host.session_id,
            files_dir=files_dir,
            emit=self._emit_shared if shared else self._emit,
            state=SharedToolState(own=state, owner=owner.state) if shared else state,
            user_id=state.user_id,
            stop=self.host.stop_signal,
            settings=self.deps.settings.tools,
            profile=self._profile_info(self._granted_profile()),
            call_id=call.id,
            spawn=hooks.get("spawn"),
            switch_profile=hooks.get("switch_profile"),
            storage_left=None if storage is None else storage.remaining,
            progress=progress,
        )
        if not make or self.deps.settings.tool_approval == "auto":
            return context
        consent = self._consent(call, self.describe(call))
        return context if consent is None else msgspec.structs.replace(context, outbound=consent)

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
    # "denied" is Navi's word for a call a person or the policy declined (the LLM reads
    # its text as theirs, not as tool output): a tool's own failure is an error.
    reason = result.failure_reason or "error"
    return ToolFailed(
        call_id=call.id,
        name=call.name,
        reason="error" if reason == "denied" else reason,
        error=result.output or result.error or "the tool failed",
    )
