"""Carrying out an LLM call of the tool loop: prepare it, record ``llm.requested`` (in
the commit of what the driver holds), stream the answer, and hand back its outcome.

The outcome (``llm.completed``, or the held chunks and ``llm.failed``) is not recorded
here: the driver holds it, and the next step's events join its commit
(navi/run/decide.py, "Commits"). Text and thinking chunks are staged as they come.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import aclosing
from typing import NamedTuple

import structlog

from events.types import (
    CallOptions,
    Event,
    LLMCompleted,
    LLMFailed,
    LLMRequested,
    LLMText,
    LLMThinking,
    LLMToolCalls,
    ToolCall,
)
from navi.llm.base import LLMBackend
from navi.llm.errors import LLMError
from navi.llm.types import (
    FinalChunk,
    JSONFormat,
    LLMOptions,
    TextPiece,
    ThinkingPiece,
    ToolCallsChunk,
)
from navi.run import permissions
from navi.run.host import Commit, RunDeps, RunHost, active_profile, is_subagent
from profiles import Profile
from projections.user_settings import UserSettings

log = structlog.get_logger(__name__)


class Call(NamedTuple):
    """An LLM call of the loop, prepared: what ``llm.requested`` records and the stream
    needs."""

    profile: Profile
    backend: LLMBackend
    subagent: bool
    names: list[str]
    options: LLMOptions
    request: LLMRequested


class LLMStep:
    def __init__(self, host: RunHost, deps: RunDeps) -> None:
        self.host = host
        self.deps = deps
        self.state = host.state
        self.log = log.bind(session_id=host.session_id)
        # The user's saved settings (thinking on/off), read once per run by the driver.
        self.saved = UserSettings()

    async def call(
        self,
        commit: Commit,
        iteration: int,
        attempt: int,
        *,
        think_off: bool,
        injected: Sequence[Event] = (),
    ) -> list[Event]:
        """Make the call (``injected`` goes just before its ``llm.requested``); returns
        its outcome. Nothing happens if a stop wins the commit."""
        call = await self.prepare(iteration, attempt, think_off=think_off)
        if not await commit([*injected, call.request]):
            return []
        return await self.stream(call)

    async def prepare(self, iteration: int, attempt: int, *, think_off: bool) -> Call:
        """What the call will be: its backend, tools, options and ``llm.requested``."""
        profile = active_profile(self.state, self.deps)
        backend = await self.deps.backend_for(profile)
        subagent = is_subagent(self.state)
        names = permissions.allowed_tools(
            self.deps.builder,
            self.deps.users,
            profile,
            subagent=subagent,
            user_id=self.state.user_id,
        )
        if backend.name == "embedded" and not self.deps.settings.embedded_tools:
            # The small packaged model cannot drive tools (it loops on them), and their
            # schemas triple its prompt: it chats unless NAVI_EMBEDDED_TOOLS=true.
            names = []
        options = self._options(profile, self.saved, think_off=think_off)
        request = LLMRequested(
            iteration=iteration,
            attempt=attempt,
            max_attempts=self.deps.settings.llm_retries + 1,
            model=options.model or backend.model,
            tools=tuple(names),
            options={
                "temperature": options.temperature,
                "num_ctx": options.num_ctx,
                "think": options.think,
                "backend": backend.name,
                **_asked(options),
            },
        )
        return Call(profile, backend, subagent, names, options, request)

    def _options(self, profile: Profile, saved: UserSettings, *, think_off: bool) -> LLMOptions:
        # The user's setting (on, off) wins over the profile's; a retry may turn it off.
        think: bool | str | None = False
        if think_off or saved.think == "off":
            think = False
        elif saved.think == "on":
            think = self.deps.settings.llm.think or True
        elif profile.think_enabled:
            think = self.deps.settings.llm.think
        # What the caller asked of this run (/v1: docs/api.md) wins over the profile.
        asked = self.state.progress.call_options or CallOptions()
        return LLMOptions(
            # The chat's model picker, else the profile's model, else the backend's.
            model=self.state.chosen_model or profile.model,
            temperature=profile.temperature if asked.temperature is None else asked.temperature,
            num_ctx=profile.num_ctx or self.deps.settings.llm.num_ctx,
            think=think,
            max_tokens=asked.max_tokens,
            stop=asked.stop,
            json_format=JSONFormat.of(asked.response_format),
        )

    async def stream(self, call: Call) -> list[Event]:
        """Stream the answer to a recorded ``llm.requested``; returns its outcome (none
        when a stop ended it: the stop is the driver's next step)."""
        profile, backend, subagent, names, options, request = call
        host = self.host
        # The context as of the decision (with what its commit added to it).
        messages = await self.deps.builder.messages(
            self.state.context.as_list(), profile, user_id=self.state.user_id, subagent=subagent
        )
        requested_seq = self.state.last_seq
        prefix = call_id_prefix(host.session_id, subagent=subagent)
        content: list[str] = []
        thinking: list[str] = []
        calls: list[ToolCall] = []
        final: FinalChunk | None = None
        # Tool calls are staged as a chunk only if more of the answer follows them (text,
        # thinking) or it breaks off (a failure, a stop). Usually the answer ends right
        # after its calls, and llm.completed, which carries the same calls, is committed
        # at once: the chunk would be a row that no reader could ever see on its own.
        held: list[LLMToolCalls] = []
        try:
            async with aclosing(
                backend.stream_complete(
                    messages,
                    self.deps.builder.tool_specs(names),
                    options,
                    stop=host.stop_signal,
                )
            ) as stream:
                async for chunk in stream:
                    if type(chunk) is TextPiece or type(chunk) is ThinkingPiece:
                        if held:
                            for event in held:
                                await host.stage(event)
                            held.clear()
                        if type(chunk) is TextPiece:
                            content.append(chunk.text)
                            await host.stage(LLMText(text=chunk.text))
                        else:
                            thinking.append(chunk.text)
                            await host.stage(LLMThinking(text=chunk.text))
                    elif type(chunk) is ToolCallsChunk:
                        named = _name_calls(chunk.calls, prefix, requested_seq, len(calls))
                        calls.extend(named)
                        held.append(LLMToolCalls(calls=tuple(named)))
                    elif type(chunk) is FinalChunk:
                        final = chunk
                        if chunk.finish_reason == "stopped":
                            for event in held:
                                await host.stage(event)
        except LLMError as exc:
            self.log.warning(
                "llm.failed", error=exc.message, kind=exc.kind, attempt=request.attempt
            )
            return [*held, LLMFailed(error=exc.message, kind=exc.kind, retryable=exc.retryable)]
        if final is None or final.finish_reason == "stopped":
            return []
        return [
            LLMCompleted(
                content="".join(content),
                thinking="".join(thinking),
                tool_calls=tuple(calls),
                finish_reason=final.finish_reason,
                prompt_tokens=final.prompt_tokens,
                completion_tokens=final.completion_tokens,
            )
        ]


def _asked(options: LLMOptions) -> dict[str, object]:
    """What ``llm.requested`` records of the options a caller may set (only if set)."""
    out: dict[str, object] = {}
    if options.max_tokens is not None:
        out["max_tokens"] = options.max_tokens
    if options.stop:
        out["stop"] = list(options.stop)
    if options.json_format is not None:
        out["json"] = "object" if options.json_format.schema is None else "schema"
    return out


def call_id_prefix(stream_id: str, *, subagent: bool) -> str:
    """How the calls of a stream's answers are named: ``call_<seq>_<n>`` in a top-level
    session, ``call_<stream>_<seq>_<n>`` in a subagent's (its stream id without dashes):
    two subagents spawned together both record their first answer at the same seq, and
    a decision on one's call must never find the other's (docs/approvals.md)."""
    return f"call_{stream_id.replace('-', '')}_" if subagent else "call_"


def _name_calls(
    calls: Sequence[ToolCall], prefix: str, requested_seq: int, offset: int
) -> list[ToolCall]:
    """Give calls ids unique in the session's whole tree (servers' ids repeat across
    turns, and across subagents)."""
    return [
        ToolCall(id=f"{prefix}{requested_seq}_{offset + i}", name=c.name, arguments=c.arguments)
        for i, c in enumerate(calls)
    ]
