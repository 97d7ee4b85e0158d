"""What each LLM call of a run sees: the system prompt, the memory, the context.

System message = persona + ``---`` + profile prompt, built fresh for every call (never
stored in the log), then the memory summary if there is one, then the ``context``
projection. Profile switches and persona edits so take effect at the next call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from navi.llm.types import ChatMessage, ToolSpec
from profiles import Profile, ProfileRegistry
from projections.types import Message
from tools import ToolRegistry

MemorySummary = Callable[[str], Awaitable[str | None]]
"""user id → the memory message ("## What I remember about the user …") or None."""


def to_chat(message: Message) -> ChatMessage:
    return ChatMessage(
        role=message.role,
        content=message.content,
        images=message.images,
        tool_calls=message.tool_calls,
        tool_call_id=message.tool_call_id,
        tool_name=message.name if message.role == "tool" else None,
    )


class ContextBuilder:
    def __init__(
        self,
        profiles: ProfileRegistry,
        tools: ToolRegistry,
        memory: MemorySummary | None = None,
    ) -> None:
        self.profiles = profiles
        self.tools = tools
        self.memory = memory

    def system_prompt(self, profile: Profile, *, subagent: bool = False) -> str:
        if subagent:
            return self.profiles.subagent_prompt_for(profile)
        return self.profiles.system_prompt_for(profile)

    async def messages(
        self,
        context: Sequence[Message],
        profile: Profile,
        *,
        user_id: str,
        subagent: bool = False,
    ) -> list[ChatMessage]:
        out = [ChatMessage(role="system", content=self.system_prompt(profile, subagent=subagent))]
        if self.memory is not None and not subagent:
            remembered = await self.memory(user_id)
            if remembered:
                out.append(ChatMessage(role="system", content=remembered))
        out.extend(to_chat(m) for m in context)
        return out

    def tool_names(self, profile: Profile, *, subagent: bool = False) -> list[str]:
        enabled = profile.subagent_tool_names if subagent else profile.enabled_tools
        return self.tools.names_for_profile(enabled)

    def tool_specs(self, names: Sequence[str]) -> list[ToolSpec]:
        specs = []
        for name in names:
            tool = self.tools.get(name)
            if tool is not None:
                specs.append(
                    ToolSpec(
                        name=tool.name, description=tool.description, parameters=tool.parameters
                    )
                )
        return specs
