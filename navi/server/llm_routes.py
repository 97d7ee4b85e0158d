"""The LLM as the web client sees it: is its server answering, and which models it has.

- ``GET /llm/status`` → ``{"reachable", "backend", "model", "model_reason",
  "model_missing", "checked_at", "error"?}``: whether the backend in use answered its
  model list just now (the footer's dot), and why that model (navi.llm.model_choice).
- ``GET /llm/models?profile_id=`` → ``{"backend", "default_model", "models": [{"name",
  "size_bytes"}], "error"?}``: the models the backend lists (the chat's model picker)
  and the model a chat of that profile uses when none is picked.

Both ask the backend at most every ``FRESH_S`` seconds (one answer shared by every tab
and both routes), and wait at most ``PROBE_S`` for it: a server that does not answer is
"unreachable", never a hanging request. Under ``auto`` on the embedded model they first
ask Ollama again (as a new turn does, at most every ``NAVI_LLM_REPROBE_SECONDS``): once
it answers, Navi uses it and its models are the ones listed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from navi.llm.auto import backend_in_use, model_choice_of
from navi.llm.base import LLMBackend
from navi.llm.errors import LLMError
from navi.llm.types import ModelInfo
from navi.server.http import json_response, user_of
from navi.server.state import state_of
from projections.types import iso_time

FRESH_S = 10.0
PROBE_S = 3.0


@dataclass
class Probe:
    """The backend's last answer to "which models do you have?"."""

    backend: LLMBackend
    at: float  # time.time() of the answer
    models: list[ModelInfo] = field(default_factory=list)
    error: str | None = None


async def _probe(request: Request) -> Probe:
    navi = state_of(request).navi
    last: Probe | None = getattr(request.app.state, "llm_probe", None)
    fresh = last is not None and time.time() - last.at < FRESH_S
    with anyio.move_on_after(PROBE_S):  # at most every NAVI_LLM_REPROBE_SECONDS
        await navi.reprobe(now=False)
    backend = backend_in_use(navi.backend)
    if last is not None and last.backend is backend and fresh:
        return last
    probe = Probe(backend=backend, at=time.time())
    try:
        with anyio.fail_after(PROBE_S):
            probe.models = await backend.list_models()
    except TimeoutError:
        probe.error = f"the LLM server did not answer within {PROBE_S:.0f} s"
    except LLMError as exc:
        probe.error = exc.message
    request.app.state.llm_probe = probe
    return probe


async def llm_status(request: Request) -> Response:
    """Whether the LLM server in use answers (asked at most every 10 s)."""
    user_of(request)
    probe = await _probe(request)
    choice = model_choice_of(probe.backend)
    body: dict[str, object] = {
        "reachable": probe.error is None,
        "backend": probe.backend.name,
        "model": probe.backend.model,
        "model_reason": choice.reason if choice is not None else "",
        "model_missing": choice.missing if choice is not None else False,
        "checked_at": iso_time(probe.at),
    }
    if probe.error is not None:
        body["error"] = probe.error
    return json_response(body)


async def llm_models(request: Request) -> Response:
    """The models the LLM server lists, and the default of ``?profile_id=`` (else of the
    default profile)."""
    user_of(request)
    navi = state_of(request).navi
    profile = navi.profiles.get(request.query_params.get("profile_id") or navi.profiles.default_id)
    probe = await _probe(request)
    body: dict[str, object] = {
        "backend": probe.backend.name,
        "default_model": profile.model or probe.backend.model,
        "models": [{"name": m.name, "size_bytes": m.size_bytes} for m in probe.models],
    }
    if probe.error is not None:
        body["error"] = probe.error
    return json_response(body)


ROUTES = [
    Route("/llm/status", llm_status, methods=["GET"]),
    Route("/llm/models", llm_models, methods=["GET"]),
]
