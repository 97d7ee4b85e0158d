"""What ``navi doctor`` says about the LLM: which backend answers, why, and how to do
better when it is the embedded demo model.

The doctor used to print "✓ LLM: embedded …" and "All good." on a machine where Ollama
did not answer: the user never learnt that the answers came from a 135M-parameter demo
model, nor how to connect a real one. A fall-back is now a finding that is not ok, and
so is a configured model that Ollama does not have (navi.llm.model_choice); an installed
model used in place of the built-in default is said, with why.
"""

from __future__ import annotations

import msgspec

from navi.llm.auto import AutoBackend, backend_in_use, model_choice_of
from navi.llm.base import LLMBackend
from navi.llm.connection import verify
from navi.llm.embedded import EmbeddedBackend
from navi.llm.errors import LLMError, redact_url
from navi.llm.selection import select_backend
from navi.llm.settings import LLMSettings

__all__ = ["Finding", "diagnose_llm", "is_demo_model"]

DEMO_MODEL = "SmolLM2-135M"
HOW_TO_CONNECT = (
    "for real work start Ollama (`ollama serve`, then `ollama pull {model}`) or set "
    "OLLAMA_HOST to where it runs, or NAVI_LLM_BACKEND=openai with OPENAI_BASE_URL"
)


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    """One line of the doctor's report; ``ok=False`` counts as a problem."""

    ok: bool
    text: str


def is_demo_model(backend: LLMBackend) -> bool:
    """Whether the answers come from the packaged SmolLM2-135M (through ``auto`` too)."""
    in_use = backend_in_use(backend)
    return isinstance(in_use, EmbeddedBackend) and in_use.is_demo_model


async def diagnose_llm(settings: LLMSettings) -> list[Finding]:
    """The backend ``settings`` choose, its models and its context window."""
    try:
        try:  # as navi serve chooses it (an OpenAI-compatible server's first model)
            backend, _ = await verify(settings)
        except LLMError:  # the models line below says why
            backend = await select_backend(settings)
    except LLMError as exc:
        return [Finding(ok=False, text=f"LLM: {exc}")]
    try:
        findings = [_backend_finding(backend, settings)]
        choice = model_choice_of(backend)
        if choice is not None and choice.reason:
            # A model Navi uses in place of the default is said; a missing one is a problem.
            findings.append(Finding(ok=not choice.missing, text=f"model: {choice.reason}"))
        try:
            models = await backend.list_models()
        except LLMError as exc:
            findings.append(Finding(ok=False, text=f"models: {exc}"))
        else:
            names = ", ".join(m.name for m in models[:8]) or "none"
            findings.append(Finding(ok=bool(models), text=f"models available: {names}"))
        window = await backend.context_window()
        findings.append(Finding(ok=True, text=f"context window: {window:,} tokens"))
        return findings
    finally:
        await backend.aclose()


def _backend_finding(backend: LLMBackend, settings: LLMSettings) -> Finding:
    how = HOW_TO_CONNECT.format(model=settings.default_model)
    if isinstance(backend, AutoBackend):
        host = redact_url(settings.ollama_host)
        if is_demo_model(backend):
            using = f"the embedded demo model ({DEMO_MODEL}, small and slow: {how})"
        else:
            using = f"the embedded model {backend.model} ({how})"
        return Finding(ok=False, text=f"Ollama did not answer at {host}; using {using}")
    text = f"LLM: {backend.name} at {backend.url}, model {backend.model}"
    if is_demo_model(backend):
        text += f" — the embedded demo model ({DEMO_MODEL}, small and slow: {how})"
    return Finding(ok=True, text=text)
