"""A lean LangChain chat model for bench/langgraph_compare.py (not a benchmark itself):
OpenAI's streamed chat wire read with one shared ``httpx.AsyncClient`` and ``json.loads``
per SSE line, each piece yielded as an ``AIMessageChunk`` (text, or a tool call's chunk).

``langchain-openai``'s ``ChatOpenAI`` goes through the official OpenAI SDK, which builds
a pydantic model per streamed chunk (``openai/_models.py construct_type`` is most of its
CPU under py-spy); this model measures LangGraph's own cost per step and per chunk with
a client about as cheap as Navi's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import httpx
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel, agenerate_from_stream
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.messages.tool import ToolCallChunk
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def _wire(message: BaseMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": _ROLES.get(message.type, "user"), "content": message.content}
    calls = getattr(message, "tool_calls", None)
    if calls:
        out["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
            }
            for c in calls
        ]
    if message.type == "tool":
        out["tool_call_id"] = getattr(message, "tool_call_id", "")
    return out


class LeanChatModel(BaseChatModel):
    base_url: str
    model: str
    http: httpx.AsyncClient
    model_config = ConfigDict(arbitrary_types_allowed=True)

    @property
    def _llm_type(self) -> str:
        return "lean-openai"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError("async only")

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        raise NotImplementedError("async only")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return await agenerate_from_stream(self._astream(messages, stop, run_manager, **kwargs))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [_wire(m) for m in messages],
            "stream": True,
        }
        if kwargs.get("tools"):
            body["tools"] = kwargs["tools"]
        url = f"{self.base_url}/chat/completions"
        async with self.http.stream("POST", url, json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                choices = json.loads(line[6:]).get("choices") or [{}]
                delta = choices[0].get("delta") or {}
                calls = [
                    ToolCallChunk(
                        name=(c.get("function") or {}).get("name"),
                        args=(c.get("function") or {}).get("arguments"),
                        id=c.get("id"),
                        index=c.get("index"),
                        type="tool_call_chunk",
                    )
                    for c in delta.get("tool_calls") or []
                ]
                text = delta.get("content") or ""
                if not text and not calls:
                    continue
                chunk = ChatGenerationChunk(
                    message=AIMessageChunk(content=text, tool_call_chunks=calls)
                )
                if run_manager is not None and text:
                    await run_manager.on_llm_new_token(text, chunk=chunk)
                yield chunk
