"""What each LLM call of a run sees: the system prompt, the memory, the context.

System message = persona + ``---`` + profile prompt, built fresh for every call (never
stored in the log), then the memory summary if there is one, then the ``context``
projection. Profile switches and persona edits so take effect at the next call.

A user's images are references in the log; their bytes are read from the blob store
(navi/blobs.py) here, at call time, and go to the backend as data URLs.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Sequence

import structlog

from events.types import ImageRef
from navi.blobs import BlobStore
from navi.llm.types import ChatMessage, ToolSpec
from navi.llm.wire_parts import IdentityCache
from profiles import Profile, ProfileRegistry
from projections.tool_results import as_untrusted
from projections.types import Message
from tools import ToolRegistry

log = structlog.get_logger(__name__)

MemorySummary = Callable[[str], Awaitable[str | None]]
"""user id → the memory message ("## What I remember about the user …") or None."""


BlobReader = Callable[[str], bytes | None]
"""sha256 → the image's bytes, if the session's user may have them."""


def to_chat(message: Message, read_blob: BlobReader | None = None) -> ChatMessage:
    tool = message.role == "tool"
    return ChatMessage(
        role=message.role,
        # A tool's output is data the LLM reads (a hostile page, a planted file), never
        # instructions: it says so, on the wire only (the log and projections keep the
        # result as recorded, so replay and the UI are unchanged). A declined call has no
        # output: its text is the user's decision in their words ("The user declined
        # this call: …"; Navi's own for a policy or a timeout), read as such.
        content=as_untrusted(message.content) if tool and not message.declined else message.content,
        images=image_data(message.images, read_blob),
        tool_calls=message.tool_calls,
        tool_call_id=message.tool_call_id,
        tool_name=message.name if tool else None,
    )


def image_data(images: tuple[str | ImageRef, ...], read_blob: BlobReader | None) -> tuple[str, ...]:
    """The images as the backends take them: base64 data URLs (inline ones as they
    were recorded). An image whose blob is gone, or is not the user's (an imported log
    may name any hash), is left out, and logged."""
    out = []
    for image in images:
        if isinstance(image, str):  # recorded inline (or a tool's image): as it is
            out.append(image)
            continue
        ref = image
        if ref.data:
            out.append(ref.data)
            continue
        data = read_blob(ref.sha256) if read_blob is not None else None
        if data is None:
            log.warning("image.missing", sha256=ref.sha256)
            continue
        media_type = ref.media_type or "image/png"
        out.append(f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}")
    return tuple(out)


def _system(content: str) -> ChatMessage:
    return ChatMessage(role="system", content=content)


class ContextBuilder:
    def __init__(
        self,
        profiles: ProfileRegistry,
        tools: ToolRegistry,
        memory: MemorySummary | None = None,
        blobs: BlobStore | None = None,
    ) -> None:
        self.profiles = profiles
        self.tools = tools
        self.memory = memory
        self.blobs = blobs
        self._user_id = ""  # whose images _chat_of may read: set by messages()
        # Every LLM call offers the same tools until the tool set changes (a reload):
        # their names by profile and their specs, built once per tool-set generation.
        self._generation = -1
        self._names: dict[tuple[str, bool, tuple[str, ...]], tuple[str, ...]] = {}
        self._specs: dict[tuple[str, ...], tuple[ToolSpec, ...]] = {}
        # The same context messages give the same chat messages, call after call: a
        # backend then encodes each of them once (navi.llm.wire_parts). Not those with
        # images: they are rare, and large enough not to be kept a while longer.
        self._chat = IdentityCache[Message, ChatMessage](to_chat, max_entries=4096)
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
        # Read by _chat_of while the list is converted (synchronously: no other call's
        # user can come between).
        self._user_id = user_id
        out.extend(self._chat_of(message) for message in context)
        return out

    def _chat_of(self, message: Message) -> ChatMessage:
        if not message.images:
            return self._chat(message)
        return to_chat(message, self._read_blob if self.blobs is not None else None)

    def _read_blob(self, sha256: str) -> bytes | None:
        assert self.blobs is not None
        return self.blobs.read_held(self._user_id, sha256)

    def tool_names(self, profile: Profile, *, subagent: bool = False) -> list[str]:
        """The profile's tools: those it enables, and the external (MCP) tools whose
        source names it; a subagent under an explicit ``subagent_tools`` list gets only
        the external tools that list names."""
        enabled = tuple(profile.subagent_tool_names if subagent else profile.enabled_tools)
        only_named = subagent and bool(profile.subagent_tools)
        key = (profile.id, only_named, enabled)
        self._fresh()
        names = self._names.get(key)
        if names is None:
            names = self._names[key] = tuple(
                self.tools.names_for_profile(enabled, profile_id=profile.id, only_named=only_named)
            )
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
