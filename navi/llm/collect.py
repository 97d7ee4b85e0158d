"""``complete()`` for every backend: the same stream, gathered into one result.

One code path means the non-streaming calls (planning, compression, memory) get the
same quirk handling, timeouts and stop as the streaming ones.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing

from navi.llm.stop import StopSignal
from navi.llm.types import (
    ChatMessage,
    Completion,
    FinalChunk,
    LLMOptions,
    StreamChunk,
    TextPiece,
    ThinkingPiece,
    ToolCall,
    ToolCallsChunk,
    ToolSpec,
)

__all__ = ["CompletesFromStream", "collect"]


async def collect(stream: AsyncGenerator[StreamChunk, None], *, model: str) -> Completion:
    text: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    final = FinalChunk()
    async with aclosing(stream):
        async for chunk in stream:
            if type(chunk) is TextPiece:
                text.append(chunk.text)
            elif type(chunk) is ThinkingPiece:
                thinking.append(chunk.text)
            elif type(chunk) is ToolCallsChunk:
                calls.extend(chunk.calls)
            elif type(chunk) is FinalChunk:
                final = chunk
    return Completion(
        content="".join(text),
        thinking="".join(thinking),
        tool_calls=tuple(calls),
        finish_reason=final.finish_reason,
        prompt_tokens=final.prompt_tokens,
        completion_tokens=final.completion_tokens,
        model=model,
    )


class CompletesFromStream:
    """Gives a backend its ``complete()``: its own stream, gathered."""

    # The backend's own, as LLMBackend has them (declared for the type checker).
    stream_complete: Callable[..., AsyncGenerator[StreamChunk, None]]

    @property
    def model(self) -> str:
        raise NotImplementedError

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        options: LLMOptions | None = None,
        *,
        stop: StopSignal | None = None,
    ) -> Completion:
        model = (options.model if options else None) or self.model
        return await collect(self.stream_complete(messages, tools, options, stop=stop), model=model)
