"""Context compression: older turns of the LLM context become one summary.

Triggers (seeds: architecture-reference, Context Compression):

- before a tool-loop LLM call, when the context's token count reaches
  ``num_ctx * CONTEXT_COMPRESSION_THRESHOLD`` (``compress_if_needed``, called by the
  run driver);
- after ``run.completed``, as the post-turn worker ``CompressionWorker``.

Algorithm: cut the context into turns — a turn is one message, or an assistant message
with its tool calls together with their results, so a tool-call group is never split
(``projections.compression.units``) — keep the last ``CONTEXT_KEEP_RECENT`` turns
verbatim, format the older ones as text (tool arguments cut to 120 characters, results
to 300, the whole to 12,000) and summarise them with the same model (think off,
``CONTEXT_SUMMARY_TEMPERATURE``, bullet points).

What is recorded: ``context.compressing`` → ``llm.requested(purpose="compress")`` →
``llm.completed`` → ``context.compressed`` (the covered seq range, the summary, the
model, ``messages_before``/``messages_after``; an older summary inside the range is
superseded). The ``context`` projection applies it; ``messages`` never changes. A failed
summary call records ``llm.failed`` + ``context.compression_failed``: the context
stays as it was, and the failure is in the log.

A recompression (navi/run/recompress.py, asked for by ``navi recompress``) summarises the
range of the latest summary again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from events.envelope import Recorded
from events.types import (
    ContextCompressed,
    ContextCompressing,
    ContextCompressionFailed,
    LLMCompleted,
    LLMFailed,
    LLMRequested,
    ToolCompleted,
    ToolFailed,
)
from navi.llm.errors import LLMError
from navi.llm.types import ChatMessage, LLMOptions
from navi.run.host import active_profile
from navi.run.state import RunState
from profiles import Profile
from projections import context as context_projection
from projections.compression import SummarySpan, compress, units
from projections.types import Message

if TYPE_CHECKING:
    from navi.run.host import RunDeps, RunHost

log = structlog.get_logger(__name__)

ARG_CHARS = 120
RESULT_CHARS = 300
MESSAGE_CHARS = 2000
INPUT_CHARS = 12_000
SUMMARY_HEADER = "Summary of the earlier conversation:\n"
INTERRUPTED = "interrupted by a restart before the summary was recorded"

SUMMARY_SYSTEM = """\
You compress the earlier part of a conversation between a user and an AI assistant, so
that the assistant can continue the work with only your summary and the latest messages.
Write concise bullet points ("- ...") covering: what the user asked for and wants, the
decisions and facts established, what was done with which tools and what came of it
(keep exact file paths, URLs, names, numbers and error messages), and what is still
open. An earlier summary, if there is one, must be carried over. Never invent anything.
Reply with the bullet points only."""

# The states in which a compression may start (see navi/run/state.py).
CAN_START = frozenset(
    {
        RunState.AWAITING_LLM,
        RunState.EXECUTING_TOOLS,
        RunState.DONE,
        RunState.STOPPED,
        RunState.FAILED,
    }
)


@dataclass(frozen=True)
class Selection:
    """What a compression replaces: the seq range, the summary it supersedes, its input."""

    from_seq: int
    to_seq: int
    supersedes_seq: int | None
    messages: tuple[Message, ...]
    messages_before: int
    messages_after: int


# ---------------------------------------------------------------- pure parts


def summary_spans(summaries: Sequence[SummarySpan]) -> dict[int, tuple[int, int]]:
    return {seq: (first, last) for seq, first, last in summaries}


def select_old_turns(
    messages: list[Message],
    summaries: Sequence[SummarySpan],
    keep_recent: int,
    *,
    open_group: bool = False,
) -> Selection | None:
    """The older turns to summarise, keeping the last ``keep_recent`` turns, or None.

    The boundary falls between turns, and moves earlier while a kept message has a seq
    inside the range (a message placed after its seq, e.g. one deferred past tool
    results), so the recorded range covers exactly the messages summarised.
    """
    turns = units(messages)
    keep = max(keep_recent, 1 if open_group else 0)
    cut = len(turns) - keep
    spans = summary_spans(summaries)

    def span(message: Message) -> tuple[int, int]:
        if message.is_summary and message.seq in spans:
            return spans[message.seq]
        return (message.seq, message.seq)

    while cut > 0:
        end = turns[cut - 1][1]
        old, recent = messages[:end], messages[end:]
        if len(old) == 1 and old[0].is_summary:
            return None  # only a summary is old: nothing new to summarise
        covered = [span(m) for m in old]
        first = min(s[0] for s in covered)
        last = max(s[1] for s in covered)
        if all(span(m)[0] > last for m in recent):
            supersedes = next((m.seq for m in reversed(old) if m.is_summary), None)
            event = ContextCompressed(
                from_seq=first, to_seq=last, summary="", supersedes_seq=supersedes
            )
            after = compress(
                messages,
                tuple(summaries),
                event,
                seq=0,
                created_at="",
                open_group_at_end=open_group,
            )
            if after is None:
                return None
            return Selection(
                from_seq=first,
                to_seq=last,
                supersedes_seq=supersedes,
                messages=tuple(old),
                messages_before=len(messages),
                messages_after=len(after[0]),
            )
        cut -= 1
    return None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


def format_turns(messages: Sequence[Message], *, limit: int = INPUT_CHARS) -> str:
    """Older turns as plain text for the summariser (cut as the seeds say)."""
    lines: list[str] = []
    for message in messages:
        if message.is_summary:
            lines.append(f"[Earlier summary]\n{_clip(message.content, MESSAGE_CHARS * 2)}")
        elif message.role == "user":
            lines.append(f"User: {_clip(message.content, MESSAGE_CHARS)}")
        elif message.role == "assistant":
            if message.content:
                lines.append(f"Assistant: {_clip(message.content, MESSAGE_CHARS)}")
            for call in message.tool_calls:
                args = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
                lines.append(f"Assistant called {call.name}({_clip(args, ARG_CHARS)})")
        elif message.role == "tool":
            outcome = "failed" if message.success is False else "returned"
            lines.append(f"Tool {message.name} {outcome}: {_clip(message.content, RESULT_CHARS)}")
        else:
            lines.append(f"[Note to the assistant] {_clip(message.content, RESULT_CHARS)}")
    text = "\n".join(lines)
    if len(text) <= limit:
        return text
    # Keep the beginning (an earlier summary, the original request) and the latest part.
    head = limit // 3
    tail = limit - head
    left_out = len(text) - head - tail
    return f"{text[:head]}\n[... {left_out} characters left out ...]\n{text[-tail:]}"


def summary_request(text: str) -> list[ChatMessage]:
    return [
        ChatMessage(role="system", content=SUMMARY_SYSTEM),
        ChatMessage(role="user", content=f"The conversation to summarise:\n\n{text}"),
    ]


def context_tokens(context: context_projection.ContextState) -> int:
    """The larger of the last recorded count and an estimate of the context as it is now
    (tool results added since the last call are not in the recorded count)."""
    return max(context.token_count, context.chars // 4)


# ---------------------------------------------------------------- effects


def over_threshold(host: RunHost, deps: RunDeps, profile: Profile) -> tuple[bool, int]:
    return _over(host.state.context, deps, profile)


def _over(
    context: context_projection.ContextState, deps: RunDeps, profile: Profile
) -> tuple[bool, int]:
    return _over_count(context_tokens(context), deps, profile)


def _over_count(tokens: int, deps: RunDeps, profile: Profile) -> tuple[bool, int]:
    settings = deps.settings
    num_ctx = deps.context_window(profile)
    return tokens >= num_ctx * settings.compression_threshold, tokens


def would_compress(host: RunHost, deps: RunDeps, ahead: Sequence[Recorded]) -> bool:
    """Whether the pre-turn check would find the context over the threshold once
    ``ahead`` (not yet recorded) is in it. Pure: the session's state is not changed."""
    if not deps.settings.compression_enabled:
        return False
    context = host.state.context
    if len(ahead) == 1 and isinstance(ahead[0].event, ToolCompleted | ToolFailed):
        # A result changes only the character count, counted without folding it in.
        tokens = max(context.token_count, context_projection.chars_after(context, ahead[0]) // 4)
    else:
        for record in ahead:
            context = context_projection.evolve(context, record)
        tokens = context_tokens(context)
    return _over_count(tokens, deps, active_profile(host.state, deps))[0]


async def compress_if_needed(host: RunHost, deps: RunDeps) -> bool:
    """Compress when the context is over the threshold; True if it was compressed."""
    if not deps.settings.compression_enabled or host.stop_signal.is_set():
        return False
    if host.state.run_state not in CAN_START:
        return False
    profile = active_profile(host.state, deps)
    needed, tokens = over_threshold(host, deps, profile)
    if not needed:
        return False
    context = host.state.context
    selection = select_old_turns(
        context.as_list(),
        context.summaries,
        deps.settings.compression_keep_recent,
        open_group=bool(context.open_calls),
    )
    if selection is None:
        return False
    return await summarise(host, deps, profile, selection, tokens=tokens)


async def abandon_interrupted(host: RunHost, *, error: str = INTERRUPTED) -> None:
    """A compression that a crash interrupted ends as failed; the context is unchanged."""
    if host.state.run_state in (RunState.COMPRESSING, RunState.COMPRESSING_AFTER_RUN):
        log.warning("compression.abandoned", session_id=host.session_id, error=error)
        await host.record(ContextCompressionFailed(error=error))


async def summarise(
    host: RunHost,
    deps: RunDeps,
    profile: Profile,
    selection: Selection,
    *,
    tokens: int,
    model: str | None = None,
) -> bool:
    backend = await deps.backend_for(profile)
    options = LLMOptions(
        model=model or profile.model,
        temperature=deps.settings.compression_summary_temperature,
        num_ctx=profile.num_ctx or deps.settings.llm.num_ctx,
        think=False,
    )
    used_model = options.model or backend.model
    if host.state.run_state not in CAN_START:  # a stop came meanwhile: nothing starts
        return False
    await host.record(
        ContextCompressing(context_tokens=tokens),
        LLMRequested(
            purpose="compress",
            model=used_model,
            options={
                "temperature": options.temperature,
                "num_ctx": options.num_ctx,
                "think": False,
                "backend": backend.name,
            },
        ),
    )
    text = format_turns(selection.messages)
    bound = log.bind(session_id=host.session_id, from_seq=selection.from_seq)
    try:
        completion = await backend.complete(
            summary_request(text), (), options, stop=host.stop_signal
        )
    except LLMError as exc:
        bound.warning("compression.failed", error=exc.message)
        await host.record(
            LLMFailed(error=exc.message, kind=exc.kind, retryable=exc.retryable),
            ContextCompressionFailed(error=exc.message),
        )
        return False
    if completion.finish_reason == "stopped":
        await host.record(ContextCompressionFailed(error="stopped by the user"))
        return False
    done = LLMCompleted(
        content=completion.content,
        thinking=completion.thinking,
        finish_reason=completion.finish_reason,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
    )
    summary = completion.content.strip()
    if not summary:
        bound.warning("compression.failed", error="empty summary")
        await host.record(done, ContextCompressionFailed(error="the model gave an empty summary"))
        return False
    await host.record(
        done,
        ContextCompressed(
            from_seq=selection.from_seq,
            to_seq=selection.to_seq,
            summary=SUMMARY_HEADER + summary,
            model=used_model,
            messages_before=selection.messages_before,
            messages_after=selection.messages_after,
            supersedes_seq=selection.supersedes_seq,
        ),
    )
    bound.info(
        "compression.done",
        to_seq=selection.to_seq,
        before=selection.messages_before,
        after=selection.messages_after,
    )
    return True


class CompressionWorker:
    """The post-turn worker: after ``run.completed``, compress if still over the threshold."""

    name = "compression"

    def __init__(self, deps: RunDeps) -> None:
        self.deps = deps

    async def __call__(self, host: RunHost) -> None:
        await compress_if_needed(host, self.deps)
