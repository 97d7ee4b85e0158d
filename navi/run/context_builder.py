"""What each LLM call of a run sees: the system prompt, the memory, the context.

System message = persona + ``---`` + profile prompt, built fresh for every call (never
stored in the log), then the memory summary if there is one, then the ``context``
projection. Profile switches and persona edits so take effect at the next call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from navi.llm.types import ChatMessage, ToolSpec
from navi.llm.wire_parts import IdentityCache, ListMemo
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


def _system(content: str) -> ChatMessage:
    return ChatMessage(role="system", content=content)


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
        # Every LLM call offers the same tools until the tool set changes (a reload):
        # their names by profile and their specs, built once per tool-set generation.
        self._generation = -1
        self._names: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._specs: dict[tuple[str, ...], tuple[ToolSpec, ...]] = {}
        # The same context messages give the same chat messages, call after call: a
        # backend then encodes each of them once (navi.llm.wire_parts). Not those with
        # images: they are rare, and large enough not to be kept a while longer.
        self._chat = IdentityCache[Message, ChatMessage](to_chat, max_entries=4096)
        self._chats = ListMemo[Message, ChatMessage](self._chat_of)
        self._system = IdentityCache[str, ChatMessage](_system, max_entries=64)

    def _fresh(self) -> None:
        if self._generation != self.tools.generation:
            self._generation = self.tools.generation
            self._names.clear()
            self._specs.clear()

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
        out = [self._system(self.system_prompt(profile, subagent=subagent))]
        if self.memory is not None and not subagent:
            remembered = await self.memory(user_id)
            if remembered:
                out.append(self._system(remembered))
        out.extend(self._chats(context))
        return out

    def _chat_of(self, message: Message) -> ChatMessage:
        return to_chat(message) if message.images else self._chat(message)

    def tool_names(self, profile: Profile, *, subagent: bool = False) -> list[str]:
        enabled = tuple(profile.subagent_tool_names if subagent else profile.enabled_tools)
        self._fresh()
        names = self._names.get(enabled)
        if names is None:
            names = self._names[enabled] = tuple(self.tools.names_for_profile(enabled))
        return list(names)

    def tool_specs(self, names: Sequence[str]) -> Sequence[ToolSpec]:
        key = tuple(names)
        self._fresh()
        specs = self._specs.get(key)
        if specs is None:
            specs = self._specs[key] = tuple(self._specs_for(key))
        return specs

    def _specs_for(self, names: Sequence[str]) -> list[ToolSpec]:
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
