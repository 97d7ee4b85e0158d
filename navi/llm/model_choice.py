"""The first message works with the models the user has: when Ollama does not have the
configured model, an installed one that supports tools is used instead.

The rule (docs/llm.md, "Which model"): if the model Navi would use is in Ollama's
``/api/tags``, it is used. If not and the operator did not pin it (``OLLAMA_DEFAULT_MODEL``
unset, no profile naming a model), Navi asks ``/api/show`` about the installed models in
the order Ollama lists them (the most recently pulled or used first) and takes the first
whose ``capabilities`` include ``"tools"`` (Navi's agents call tools). If it was pinned,
or no installed model supports tools, the model stays as it is and is reported missing
(the footer, ``/health``, ``navi doctor``). Either way :class:`ModelChoice` says which
model and why, in words that name models only (never a URL: ``/health`` is public).
"""

from __future__ import annotations

import anyio
import msgspec
import structlog

from navi.llm.errors import LLMError
from navi.llm.ollama import OllamaBackend

__all__ = ["ModelChoice", "choose_model", "is_installed"]

log = structlog.get_logger()

# At most this many models are asked about their capabilities (one small request each).
MAX_SHOWN = 20


class ModelChoice(msgspec.Struct, frozen=True, kw_only=True):
    """Which model the backend uses by default, and why when it is not the configured one
    (``reason`` is "" when the configured model is installed)."""

    configured: str
    model: str
    reason: str = ""
    missing: bool = False  # the model in use is not installed: its calls will fail


def is_installed(model: str, names: list[str]) -> bool:
    """Whether Ollama lists ``model`` (``llama3.1`` is ``llama3.1:latest``)."""
    wanted = {model, f"{model}:latest"} if ":" not in model else {model}
    return any(name in wanted for name in names)


async def choose_model(
    ollama: OllamaBackend, *, pinned: bool, time_limit: float = 5.0
) -> ModelChoice:
    """The model ``ollama`` should use by default (see the module's rule); sets it on the
    backend. A server that does not answer in time leaves the configured model, unjudged."""
    configured = ollama.model
    choice = ModelChoice(configured=configured, model=configured)
    try:
        with anyio.fail_after(time_limit):
            choice = await _choose(ollama, configured, pinned=pinned)
    except (LLMError, TimeoutError) as exc:
        log.info("llm.model_not_checked", model=configured, error=str(exc))
    ollama.use_model(choice.model, choice)
    if choice.reason:
        log.warning(
            "llm.model_chosen" if not choice.missing else "llm.model_missing",
            configured=configured,
            model=choice.model,
            reason=choice.reason,
        )
    return choice


async def _choose(ollama: OllamaBackend, configured: str, *, pinned: bool) -> ModelChoice:
    names = [m.name for m in await ollama.list_models()]
    if is_installed(configured, names):
        return ModelChoice(configured=configured, model=configured)
    pull = f"`ollama pull {configured}`"
    if pinned:
        reason = f"{configured} is not installed in Ollama (it is configured): {pull}"
        return ModelChoice(configured=configured, model=configured, reason=reason, missing=True)
    for name in names[:MAX_SHOWN]:
        if "tools" in await ollama.capabilities(name):
            reason = (
                f"{configured} is not installed; using {name}, "
                "an installed model that supports tools"
            )
            return ModelChoice(configured=configured, model=name, reason=reason)
    having = (
        f"none of the installed models ({', '.join(names[:5])}) supports"
        if names
        else "no model is installed that supports"
    )
    reason = f"{configured} is not installed and {having} tools: {pull}"
    return ModelChoice(configured=configured, model=configured, reason=reason, missing=True)
