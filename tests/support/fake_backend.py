"""The scripted fake LLM inside the test process: an ``LLMBackend`` with no HTTP.

For the tests of the run, the session and what is built on them, where what matters is
what Navi does with an answer, not how it travels. It takes the same script
(:class:`~tests.support.fake_llm.Reply`) and records the same things as the HTTP fake
(``requests``: the JSON bodies Ollama's wire would carry; ``received``; ``disconnects``;
``completed``), so a test moves from one to the other by its first lines::

    async with FakeLLM() as fake:                      # was: FakeLLMServer()
        fake.script(Reply(text="Hello"))
        settings = navi_settings(tmp_path, fake.url)
        async with open_navi(settings, llm=fake) as navi:
            ...
        assert fake.requests[0]["messages"][-1]["content"] == "hi"

Its backends are Ollama backends whose chat stream comes from the script instead of a
socket: the request is built and encoded, the reply rendered to NDJSON and parsed, and
the stream guard (stop, timeouts) wraps it, as for a real server. Delays, stalls, drops,
early ends and errors (``error_before``/``error_during``) behave as over HTTP; only the
wire quirks of the OpenAI format do not apply. ``url`` names a closed port on
127.0.0.1: anything that tried to reach it over the network would fail at once.

The wire tests (``tests/navi/llm``) keep the HTTP fake: the wire is what they test.
"""

from __future__ import annotations

from types import TracebackType

import anyio
import msgspec

from navi.llm.errors import IncompleteStream, LLMError
from navi.llm.guard import RawBatches
from navi.llm.ollama import OllamaBackend
from navi.llm.ollama_wire import OllamaStreamParser, ollama_error, parse_tags
from navi.llm.settings import LLMSettings
from navi.llm.types import FinalChunk, ModelInfo
from tests.support.fake_llm import RecordedRequest, Reply, ScriptedLLM, model_tag
from tests.support.fake_llm_script import ollama_error_body, render_ollama

__all__ = ["NOWHERE", "FakeLLM", "InProcessOllama"]

# The discard port: nothing listens there, a connection is refused at once.
NOWHERE = "http://127.0.0.1:9"
_encode = msgspec.json.encode


class FakeLLM(ScriptedLLM):
    """The script and record of an LLM answered inside the process (see the module)."""

    url = NOWHERE

    def backend(self, settings: LLMSettings, *, model: str | None = None) -> InProcessOllama:
        """An ``LLMBackend`` with these settings whose answers come from this script."""
        return InProcessOllama(self, settings, model=model)

    async def __aenter__(self) -> FakeLLM:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


class InProcessOllama(OllamaBackend):
    """:class:`OllamaBackend` reading its chat answers from a :class:`FakeLLM` instead
    of a socket (``_raw`` is the backend's hook for reading its wire)."""

    def __init__(self, fake: FakeLLM, settings: LLMSettings, *, model: str | None = None) -> None:
        super().__init__(settings, model=model, url=NOWHERE)
        self._fake = fake

    async def _raw(self, body: bytes, model: str) -> RawBatches:
        fake = self._fake
        decoded = msgspec.json.decode(body)
        request = RecordedRequest(method="POST", path="/api/chat", headers={}, body=decoded)
        fake.received.append(request)
        fake.requests.append(decoded)
        number = len(fake.requests)
        fake._notify()
        reply = fake._next_reply(request)
        if reply is None:
            message = (
                f"fake LLM: no scripted reply left for chat request #{number} "
                "(queue more with fake.script(...))"
            )
            raise self._refusal(500, message, model)
        ended = False
        try:
            if reply.delay_first:
                await anyio.sleep(reply.delay_first)
            if reply.error_before is not None:
                ended = True  # an error answer, not an abandoned one
                raise self._refusal(
                    reply.error_status, reply.error_before.replace("{model}", model), model
                )
            async for batch in self._batches(reply, model, number):
                # The guard stops reading at the final chunk: that is the end, not a hang-up.
                ended = any(type(chunk) is FinalChunk for chunk in batch)
                yield batch
            ended = True
        except LLMError:
            ended = True  # an error line or a drop: the server's doing, not the client's
            raise
        finally:
            if not ended:
                fake.disconnects += 1
                fake._notify()

    async def _batches(self, reply: Reply, model: str, number: int) -> RawBatches:
        """The reply as the HTTP fake would send it, parsed as the Ollama backend does."""
        if reply.raw_body is not None or reply.empty_body:
            chunks = [(reply.raw_body or "").encode()]
            tail: list[bytes] = []
        else:
            rendered = render_ollama(reply, model=model, request_number=number)
            chunks, tail = rendered.chunks, rendered.tail
        cuts = [c for c in (reply.stall_after, reply.drop_after, reply.end_after) if c is not None]
        cut = min(min(cuts), len(chunks)) if cuts else None
        lines = chunks[:cut] if cut is not None else chunks + tail
        parser = OllamaStreamParser(self._url)
        if reply.delay:
            for index, line in enumerate(lines):
                if index:
                    await anyio.sleep(reply.delay)
                yield parser.feed(line)
                parser.raise_pending()
        else:
            yield parser.feed(b"".join(lines))
            parser.raise_pending()
        if cut is not None and cut == reply.stall_after:
            await anyio.sleep_forever()
        if cut is not None and cut == reply.drop_after:
            raise IncompleteStream("the connection dropped (the fake LLM's drop_after)")
        self._fake.completed += 1
        yield parser.finish()

    def _refusal(self, status: int, message: str, model: str) -> LLMError:
        return ollama_error(status, _encode(ollama_error_body(message)), model=model, url=self._url)

    async def list_models(self) -> list[ModelInfo]:
        self._record("GET", "/api/tags")
        return parse_tags(_encode({"models": [model_tag(m) for m in self._fake.models]}))

    async def _trained_length(self, model: str) -> int | None:
        self._record("POST", "/api/show", {"model": model})
        known = model in self._fake.models or f"{model}:latest" in self._fake.models
        return self._fake.context_length if known else None

    async def version(self, time_limit: float) -> str:
        self._record("GET", "/api/version")
        return "0.12.6"

    def _record(self, method: str, path: str, body: object = None) -> None:
        self._fake.received.append(RecordedRequest(method=method, path=path, headers={}, body=body))
