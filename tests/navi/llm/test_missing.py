"""No usable LLM at all: Navi starts on a :class:`MissingBackend`, whose every call says
why and how to connect one, and (``auto``) moves to an Ollama started later."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

import anyio
import msgspec
import pytest

from events.envelope import Recorded
from navi.app import Navi
from navi.llm.auto import AutoBackend, backend_in_use
from navi.llm.errors import LLMError
from navi.llm.missing import HOW_TO_CONNECT, MISSING, MissingBackend
from navi.llm.types import ChatMessage
from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.helpers import free_port
from tests.support.navi_app import navi_settings, run_stream

pytestmark = pytest.mark.anyio

ASK = [ChatMessage(role="user", content="hi")]


async def run_to_end(navi: Navi, session: str, text: str) -> list[Recorded]:
    with anyio.fail_after(30):
        async with aclosing(run_stream(navi, session, text)) as stream:
            return [record async for record in stream]


async def test_every_call_says_why_and_how_to_connect_one() -> None:
    backend = MissingBackend("Ollama did not answer", num_ctx=4096)
    assert (backend.name, backend.model, backend.url) == (MISSING, "", "")
    for call in (backend.complete(ASK), backend.list_models()):
        with pytest.raises(LLMError) as caught:
            await call
        assert caught.value.message == f"Ollama did not answer. {HOW_TO_CONNECT}"
        assert caught.value.kind == "no_backend" and not caught.value.retryable
    assert await backend.context_window() == 4096
    assert await backend.context_window(num_ctx=1024) == 1024


async def test_navi_opens_without_any_llm_and_uses_an_ollama_started_later(
    tmp_path: Path,
) -> None:
    port = free_port()  # nothing there yet
    settings = navi_settings(tmp_path, f"http://127.0.0.1:{port}")
    llm = msgspec.structs.replace(
        settings.llm,
        backend="auto",
        embedded_model_path=str(tmp_path / "no-such-model.gguf"),
        reprobe_seconds=0,
    )
    settings = msgspec.structs.replace(settings, llm=llm)
    async with Navi.open(settings, background=False) as navi:
        assert isinstance(navi.backend, AutoBackend)
        missing = backend_in_use(navi.backend)
        assert isinstance(missing, MissingBackend)
        assert "no-such-model.gguf" in missing.error.message
        assert HOW_TO_CONNECT in missing.error.message
        session = await navi.create_session()
        async with FakeLLMServer(port=port, default=Reply(text="From Ollama.")):
            await navi.send(session, "hello")
            assert backend_in_use(navi.backend).name == "ollama"
