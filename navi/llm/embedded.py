"""EmbeddedBackend: llama.cpp in-process, so Navi works with no LLM server at all.

Generation runs in a worker thread and streams back to the event loop through a
bounded memory object stream (``anyio.from_thread.run`` with the loop's token, so
the thread blocks when the loop falls behind). The loop side owns both ends of the
stream and closes them; once a call is over or stopped, the worker never waits on
the loop again (a loop that has ended would leave it blocked for good). The thread is a plain thread rather
than ``anyio.to_thread.run_sync`` in a task group because a task group would have
to stay open across the ``yield``s of the chunk generator, and cancel scopes must
never span a ``yield``; the stop and the timeouts stay in the stream guard.

* Text streams token by token. With tools offered, llama-cpp-python's
  ``chatml-function-calling`` format produces grammar-constrained tool calls (so
  even a 135M model emits valid ones), without streaming. When the model chooses
  to answer in text instead, the text is generated again as a plain stream:
  that format's own "message" branch is constrained to an empty answer.
* A stop reaches the generation loop within one token: the streaming loop checks
  it after every token, and a logits processor (called before every token, also
  in the non-streaming tool path) arms an :class:`AbortSwitch` that makes
  llama.cpp abort its next decode.
* One generation at a time (a llama.cpp context is not shared); a waiting call
  waits in its own thread, never on the event loop.
* An answer is capped at ``NAVI_EMBEDDED_MAX_TOKENS`` (512) unless the call sets
  ``max_tokens``, and a text answer that loops (:mod:`navi.llm.repetition`) is ended
  there: both finish normally, with a note saying why the answer ends.
* ``content: None`` breaks the chat template: messages always carry a string.
  The template has no tool role, so tool results are shown to the model as user
  messages naming the function.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import msgspec
import structlog
from anyio.lowlevel import EventLoopToken, current_token
from anyio.streams.memory import MemoryObjectSendStream

from navi.llm.collect import CompletesFromStream
from navi.llm.embedded_model import AbortSwitch, check_available, load_llama
from navi.llm.errors import LLMError, StreamError
from navi.llm.guard import RawBatches, guard_stream
from navi.llm.repetition import RepetitionGuard
from navi.llm.settings import LLMSettings
from navi.llm.stop import StopSignal
from navi.llm.tool_calls import stable_tool_call_id, tool_arguments
from navi.llm.types import (
    ChatMessage,
    FinalChunk,
    LLMOptions,
    ModelInfo,
    StreamChunk,
    TextPiece,
    ToolCall,
    ToolCallsChunk,
    ToolSpec,
)
from navi.llm.wire_parts import encode_tool, encode_tool_call

__all__ = ["EmbeddedBackend", "GenerationStats"]

log = structlog.get_logger()
# Chunks waiting for the loop; the worker blocks beyond this (backpressure).
STREAM_BUFFER = 64
# A mild penalty on repeated tokens: SmolLM2-135M loops without one (the guard ends
# what still loops).
REPEAT_PENALTY = 1.1
# finish_reason of an answer the repetition guard ended.
REPETITION = "repetition"
REPETITION_NOTE = "\n\n*(Navi stopped the embedded model here: it was repeating itself.)*"
CAP_NOTE = "\n\n*(The embedded model's answer was cut at {cap} tokens: NAVI_EMBEDDED_MAX_TOKENS.)*"

_Item = StreamChunk | LLMError


class GenerationStats(msgspec.Struct, kw_only=True):
    """What the last generation did (for tests and ``navi doctor``)."""

    tokens: int = 0
    stopped: bool = False
    # Tokens sampled after the stop was visible to the worker (at most one).
    tokens_after_stop: int = 0


class _Request(msgspec.Struct, frozen=True, kw_only=True):
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    tool_choice: str | dict[str, Any] | None
    temperature: float | None
    max_tokens: int | None
    # The cap is Navi's default (NAVI_EMBEDDED_MAX_TOKENS), not the caller's: an answer
    # it cuts says so.
    default_cap: bool = False
    stop: list[str] = []
    # llama-cpp-python's own: {"type": "json_object"[, "schema": {...}]} (a grammar).
    response_format: dict[str, Any] | None = None


class EmbeddedBackend(CompletesFromStream):
    """Runs a GGUF model in this process with llama-cpp-python."""

    def __init__(self, settings: LLMSettings, *, model_path: Path | None = None) -> None:
        self._settings = settings
        self._configured = str(model_path) if model_path else settings.embedded_model_path
        self._path: Path | None = None
        self._llama: Any = None
        self._switch: AbortSwitch | None = None
        self._lock = threading.Lock()  # one generation at a time
        self._running = 0  # generations started and not finished (guarded by _changed)
        self._changed = threading.Condition()
        self.last_generation = GenerationStats()

    @property
    def name(self) -> str:
        return "embedded"

    @property
    def model(self) -> str:
        return self.model_path().stem

    @property
    def url(self) -> str:
        return f"embedded:{self.model_path()}"

    @property
    def is_demo_model(self) -> bool:
        """True on the packaged SmolLM2-135M (no ``NAVI_EMBEDDED_MODEL``): a tiny demo."""
        return not self._configured

    async def context_window(self, model: str | None = None, num_ctx: int | None = None) -> int:
        """llama.cpp's ``n_ctx`` (``NAVI_EMBEDDED_N_CTX``): the model is loaded with it,
        whatever a call asks for."""
        return self._settings.embedded_n_ctx

    def model_path(self) -> Path:
        """The GGUF file; raises :class:`EmbeddedUnavailable` naming what is missing."""
        if self._path is None:
            self._path = check_available(self._configured)
        return self._path

    async def stream_complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        options: LLMOptions | None = None,
        *,
        stop: StopSignal | None = None,
    ) -> AsyncGenerator[StreamChunk, None]:
        self.model_path()
        opts = options if options is not None else LLMOptions()
        request = _build_request(messages, tools, opts, self._settings.embedded_max_tokens)
        guarded = guard_stream(
            self._raw(request),
            stop=stop,
            first_chunk_timeout=self._settings.first_chunk_timeout,
            chunk_timeout=self._settings.chunk_timeout,
            url=self.url,
        )
        async with aclosing(guarded) as chunks:
            async for chunk in chunks:
                yield chunk

    async def list_models(self) -> list[ModelInfo]:
        path = self.model_path()
        return [
            ModelInfo(name=path.stem, size_bytes=path.stat().st_size, details={"path": str(path)})
        ]

    async def load(self) -> None:
        """Load the model now (otherwise the first call does), off the event loop."""
        path = self.model_path()

        def load_locked() -> None:
            with self._lock:
                self._ensure_loaded(path)

        await anyio.to_thread.run_sync(load_locked)

    async def wait_idle(self) -> None:
        """Wait until no generation runs (a stopped one finishes within one token)."""

        def wait() -> None:
            with self._changed:
                self._changed.wait_for(lambda: self._running == 0)

        await anyio.to_thread.run_sync(wait)

    async def aclose(self) -> None:
        await self.wait_idle()
        self.close()

    def close(self) -> None:
        """Free the model (blocks while a generation finishes its current token)."""
        with self._lock:
            llama, self._llama, self._switch = self._llama, None, None
        if llama is not None:
            llama.close()

    # ------------------------------------------------------------ event-loop side

    async def _raw(self, request: _Request) -> RawBatches:
        send, receive = anyio.create_memory_object_stream[_Item](STREAM_BUFFER)
        abort = threading.Event()
        with self._changed:
            self._running += 1
        worker = threading.Thread(
            target=self._work,
            args=(request, send, abort, current_token()),
            name="navi-embedded-llm",
            daemon=True,
        )
        worker.start()
        ended = False  # the worker sent its last item (final chunk or error)
        try:
            with receive:
                async for item in receive:
                    if isinstance(item, LLMError):
                        ended = True
                        raise item
                    ended = type(item) is FinalChunk
                    yield (item,)
        finally:
            # Reached on stop, timeout, error or normal end alike.
            abort.set()
            send.close()
            if ended:
                # The worker no longer needs the loop and ends at once: wait, so that
                # the backend is idle when the stream is over. After a stop it is not
                # awaited (a stop must be prompt); it ends within one token.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(worker.join)

    # ------------------------------------------------------------ worker-thread side

    def _work(
        self,
        request: _Request,
        send: MemoryObjectSendStream[_Item],
        abort: threading.Event,
        token: EventLoopToken,
    ) -> None:
        stats = GenerationStats()
        switch: AbortSwitch | None = None

        def emit(item: _Item) -> bool:
            # Once aborted, never wait on the loop again: it may be gone for good.
            if abort.is_set():
                return False
            try:
                anyio.from_thread.run(send.send, item, token=token)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.RunFinishedError):
                abort.set()
                return False
            return True

        def check(_input_ids: Any, scores: Any) -> Any:
            # Called by llama.cpp before every token; it must never raise (ctypes
            # swallows exceptions), so it arms the abort switch instead.
            stats.tokens += 1
            if abort.is_set() and switch is not None:
                stats.stopped = True
                stats.tokens_after_stop += 1
                switch.arm()
            return scores

        try:
            with self._lock:
                if abort.is_set():
                    return
                llama, switch = self._ensure_loaded(self.model_path())
                try:
                    if request.tools:
                        self._generate_with_tools(llama, request, check, emit, abort, stats)
                    else:
                        self._generate_text(llama, request, check, emit, abort, stats)
                except RuntimeError:
                    if not switch.armed:
                        raise
                    # The decode we aborted on purpose.
                finally:
                    switch.disarm()
        except LLMError as exc:
            emit(exc)
        except Exception as exc:  # the thread must report every failure, never die silently
            log.exception("llm.embedded_failed")
            emit(StreamError(f"the embedded model failed: {type(exc).__name__}: {exc}"))
        finally:
            self.last_generation = stats
            with self._changed:
                self._running -= 1
                self._changed.notify_all()

    def _ensure_loaded(self, path: Path) -> tuple[Any, AbortSwitch]:
        """The model and its abort switch, loaded on first use (hold ``_lock``)."""
        if self._llama is None:
            log.info("llm.embedded_loading", model=str(path))
            self._llama = load_llama(
                path,
                n_ctx=self._settings.embedded_n_ctx,
                n_threads=self._settings.embedded_threads,
            )
            self._switch = AbortSwitch(self._llama)
        assert self._switch is not None
        return self._llama, self._switch

    def _generate_text(
        self,
        llama: Any,
        request: _Request,
        check: Callable[[Any, Any], Any],
        emit: Callable[[_Item], bool],
        abort: threading.Event,
        stats: GenerationStats,
    ) -> None:
        parts = llama.create_chat_completion(
            messages=request.messages,
            stream=True,
            temperature=_temperature(request),
            max_tokens=request.max_tokens,
            stop=request.stop or None,
            response_format=request.response_format,
            repeat_penalty=REPEAT_PENALTY,
            logits_processor=[check],
        )
        finish = "stop"
        stats.tokens = 0  # a tool-choice generation may have come first
        loops = RepetitionGuard()
        try:
            for part in parts:
                if abort.is_set():
                    stats.stopped = True
                    return
                choice = part["choices"][0]
                text = choice["delta"].get("content")
                if text and not emit(TextPiece(text)):
                    return
                finish = choice.get("finish_reason") or finish
                if text and loops.feed(text):
                    finish = REPETITION
                    break
        finally:
            parts.close()
        note = _ending_note(finish, request)
        if note and not emit(TextPiece(note)):
            return
        prompt_tokens = max(int(llama.n_tokens) - stats.tokens, 0)
        emit(
            FinalChunk(
                finish_reason=finish, prompt_tokens=prompt_tokens, completion_tokens=stats.tokens
            )
        )

    def _generate_with_tools(
        self,
        llama: Any,
        request: _Request,
        check: Callable[[Any, Any], Any],
        emit: Callable[[_Item], bool],
        abort: threading.Event,
        stats: GenerationStats,
    ) -> None:
        result = llama.create_chat_completion(
            messages=request.messages,
            tools=request.tools,
            tool_choice=request.tool_choice,
            stream=False,
            temperature=_temperature(request),
            max_tokens=request.max_tokens,
            stop=request.stop or None,
            logits_processor=[check],
        )
        choice = result["choices"][0]
        message = choice["message"]
        raw_calls = message.get("tool_calls") or []
        if not raw_calls and not message.get("content"):
            # The model chose to answer in text; that branch of the format is empty.
            self._generate_text(llama, request, check, emit, abort, stats)
            return
        if message.get("content") and not emit(TextPiece(message["content"])):
            return
        if raw_calls:
            calls = tuple(_tool_call(index, raw) for index, raw in enumerate(raw_calls))
            if not emit(ToolCallsChunk(calls)):
                return
        usage = result.get("usage") or {}
        emit(
            FinalChunk(
                finish_reason="tool_calls" if raw_calls else choice.get("finish_reason") or "stop",
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or stats.tokens),
            )
        )


# ---------------------------------------------------------------- request building


def _build_request(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec],
    options: LLMOptions,
    default_max_tokens: int,
) -> _Request:
    choice = options.tool_choice
    offered = [] if choice == "none" else list(tools)
    tool_choice: str | dict[str, Any] | None = None
    if offered:
        names = {tool.name for tool in offered}
        if choice in names:
            tool_choice = {"type": "function", "function": {"name": choice}}
        elif choice == "required" and len(offered) == 1:
            tool_choice = {"type": "function", "function": {"name": offered[0].name}}
        else:  # "auto", "required" among several (the format cannot force "some" tool)
            tool_choice = "auto"
    return _Request(
        messages=[_message(message) for message in messages],
        tools=[encode_tool(tool) for tool in offered],
        tool_choice=tool_choice,
        temperature=options.temperature,
        max_tokens=options.max_tokens or default_max_tokens,
        default_cap=not options.max_tokens,
        stop=list(options.stop),
        response_format=_response_format(options),
    )


def _response_format(options: LLMOptions) -> dict[str, Any] | None:
    """llama-cpp-python's ``response_format``: a JSON grammar, from the schema if there
    is one. Only a text answer takes it: the tool-calling format has its own grammar
    (``/v1`` refuses a JSON answer with NAVI_EMBEDDED_TOOLS on)."""
    found = options.json_format
    if found is None:
        return None
    if found.schema is None:
        return {"type": "json_object"}
    return {"type": "json_object", "schema": found.schema}


def _ending_note(finish: str, request: _Request) -> str:
    """Why a text answer ends early, told in the answer itself (the reader sees it)."""
    if finish == REPETITION:
        return REPETITION_NOTE
    if finish == "length" and request.default_cap:
        return CAP_NOTE.format(cap=request.max_tokens)
    return ""


def _message(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        name = message.tool_name or "tool"
        return {"role": "user", "content": f"Result of functions.{name}:\n{message.content}"}
    out: dict[str, Any] = {"role": message.role, "content": message.content or ""}
    if message.tool_calls:
        out["tool_calls"] = [encode_tool_call(call) for call in message.tool_calls]
    return out


def _temperature(request: _Request) -> float:
    return 0.2 if request.temperature is None else request.temperature


def _tool_call(index: int, raw: dict[str, Any]) -> ToolCall:
    function = raw["function"]
    name = str(function["name"])
    arguments = tool_arguments(name, function.get("arguments") or "{}")
    # llama-cpp-python's ids embed a random uuid; a stable id keeps runs reproducible.
    return ToolCall(id=stable_tool_call_id(index, name, arguments), name=name, arguments=arguments)
