"""``Profile``: what a profile folder declares (``config.json`` + ``system_prompt.txt``).

Field defaults follow the original Navi's ``AgentProfile``. Unknown fields are refused
so a typo in ``config.json`` is an error, not a silently ignored setting.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

import msgspec

ProfileId = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")]
ToolName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
AtLeastOne = Annotated[int, msgspec.Meta(ge=1)]
Temperature = Annotated[float, msgspec.Meta(ge=0.0, le=2.0)]
ContextSize = Annotated[int, msgspec.Meta(ge=256)]


class ProfileConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The fields of ``config.json``."""

    id: ProfileId
    name: NonEmpty
    description: str = ""
    # The LLM model; None means the server's default model.
    model: str | None = None
    temperature: Temperature = 0.7
    enabled_tools: tuple[ToolName, ...] = ()
    # Tools of a subagent spawned under this profile; empty means ``enabled_tools``.
    subagent_tools: tuple[ToolName, ...] = ()
    max_iterations: AtLeastOne = 50
    planning_enabled: bool = False
    planning_phase2_enabled: bool = False
    subagent_planning_enabled: bool = False
    think_enabled: bool = True
    iteration_budget_enabled: bool = True
    goal_anchoring_enabled: bool = True
    goal_anchoring_interval: AtLeastOne = 5
    anti_stall_enabled: bool = True
    anti_stall_threshold: AtLeastOne = 8
    step_validation_enabled: bool = False
    adaptive_replan_enabled: bool = False
    # The LLM backend (ollama | openai | embedded); None means the server's choice.
    llm_backend: NonEmpty | None = None
    # The system prompt of a subagent (after the persona); empty means ``system_prompt``.
    subagent_system_prompt: str = ""
    scratchpad_sections: tuple[NonEmpty, ...] = ()
    # code_exec and terminal may reach the network from their sandbox (off: no network).
    tool_network: bool = False
    # http_request, web_view and image_view may reach private (LAN) addresses, e.g. Home
    # Assistant; loopback, link-local and cloud-metadata addresses stay refused.
    allow_private_urls: bool = False
    # Per tool, whether a person approves a call first (navi/run/approval.py): "auto",
    # "ask" or "deny"; a tool not named keeps its own default.
    tool_policy: dict[ToolName, Literal["auto", "ask", "deny"]] = {}
    # Context window in tokens; None means the backend's setting.
    num_ctx: ContextSize | None = None


class Profile(ProfileConfig, frozen=True, kw_only=True):
    """A loaded profile: its config plus the text of ``system_prompt.txt``."""

    system_prompt: NonEmpty

    def __hash__(self) -> int:
        # Profiles key caches (the system prompt's). A frozen Struct hashes every field,
        # and ``tool_policy`` is a dict; equal profiles still compare field by field.
        return hash((self.id, self.name, self.model, self.system_prompt))

    @property
    def subagent_tool_names(self) -> tuple[str, ...]:
        return self.subagent_tools or self.enabled_tools

    @property
    def needed_grants(self) -> tuple[str, ...]:
        """The account grants a session of this profile needs (navi/grants.py), one for
        each way it widens its tools' reach: ``lan`` (``allow_private_urls``),
        ``tool_network``, ``auto_approval`` (a ``tool_policy`` of ``auto``)."""
        needed = (
            ("lan", self.allow_private_urls),
            ("tool_network", self.tool_network),
            ("auto_approval", "auto" in self.tool_policy.values()),
        )
        return tuple(grant for grant, needs in needed if needs)

    @property
    def loosens_safety(self) -> bool:
        """Whether its tools may do more than the defaults let them without a person: the
        network from the sandbox, private (LAN) addresses, or a call that would ask
        running at once. Entering it (``switch_profile``, ``spawn_agent``) asks first: an
        LLM that read a hostile page must not widen its own reach; and the account needs
        the grants it names (``needed_grants``)."""
        return bool(self.needed_grants)

    @property
    def subagent_prompt(self) -> str:
        return self.subagent_system_prompt or self.system_prompt


_DEFAULTS = {
    field.name: field.default
    if field.default_factory is msgspec.NODEFAULT
    else field.default_factory()
    for field in msgspec.structs.fields(Profile)
    if field.default is not msgspec.NODEFAULT or field.default_factory is not msgspec.NODEFAULT
}
_hash_encoder = msgspec.json.Encoder(order="sorted")


def profile_hash(profile: Profile) -> str:
    """A short, stable digest of a profile's config and system prompt.

    Recorded in ``run.started`` so a replay knows which version of the profile ran.
    Only fields that differ from their defaults count, so adding a new field (with a
    default) to ``Profile`` does not change the hash of existing profiles, and neither
    does JSON formatting or key order.
    """
    significant = {
        name: value
        for name, value in msgspec.structs.asdict(profile).items()
        if name not in _DEFAULTS or value != _DEFAULTS[name]
    }
    return hashlib.sha256(_hash_encoder.encode(significant)).hexdigest()[:16]
