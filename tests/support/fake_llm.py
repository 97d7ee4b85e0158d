"""A scripted fake LLM server on 127.0.0.1, over real HTTP, for every test that needs an LLM.

It speaks Ollama's ``/api/chat`` (NDJSON) and OpenAI's ``/v1/chat/completions``
(SSE) byte for byte as the real servers do (the official ``ollama`` client accepts
its output), plus ``/api/tags``, ``/api/version``, ``/api/show``, ``/v1/models`` and
llama.cpp's ``/props`` (the models' window: ``context_length``). It is a minimal
HTTP/1.1 server on anyio sockets (keep-alive, chunked bodies), fast enough to
stream hundreds of thousands of chunks per second.

In a test (same event loop)::

    async with FakeLLMServer() as fake:
        fake.script(Reply(thinking="hmm", text="Hello!"), Reply(tool_calls=[...]))
        backend = OllamaBackend(settings, url=fake.url)
        ...
        assert fake.requests[0]["think"] is True       # the JSON bodies received

Replies are consumed one per chat request, in order; when none is left the
``responder`` (a function of the recorded request) or the ``default`` reply
answers, else an HTTP 500 says the script ran out. ``fake.disconnects`` counts
answers the client abandoned (a stop or timeout closing the stream).

From synchronous code: ``with FakeLLMServer.in_thread() as fake:`` (same API).
As a process (for a real ``navi serve``)::

    python -m tests.support.fake_llm --port 0 --script replies.json [--default-text Hi]

prints ``fake-llm listening on http://127.0.0.1:PORT`` and accepts more replies at
``POST /_fake/script`` (a JSON list of replies); ``GET /_fake/requests`` returns the
recorded chat bodies; ``POST /_fake/reset`` drops both. :class:`FakeLLMProcess` does
all that for a test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import msgspec
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.support.fake_llm_script import (
    FakeToolCall,
    Rendered,
    Reply,
    ollama_error_body,
    ollama_whole,
    openai_error_body,
    openai_whole,
    render_ollama,
    render_openai,
)

__all__ = [
    "FakeLLMProcess",
    "FakeLLMServer",
    "FakeToolCall",
    "RecordedRequest",
    "Reply",
    "ScriptedLLM",
    "load_script",
]

_encode = msgspec.json.Encoder().encode
_replies = msgspec.json.Decoder(list[Reply])
# Events written per HTTP chunk when streaming as fast as possible.
BATCH = 512
MAX_HEADER_BYTES = 64 * 1024
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_CLIENT_GONE = (
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.IncompleteRead,
    ConnectionError,
    OSError,
)


class RecordedRequest(msgspec.Struct, frozen=True, kw_only=True):
    method: str
    path: str
    headers: dict[str, str]
    body: Any = None


Responder = Callable[[RecordedRequest], Reply]


class _BadRequest(Exception):
    pass


class ScriptedLLM:
    """The script and the record of a fake LLM, whatever carries its answers: the HTTP
    server below, or :class:`tests.support.fake_backend.FakeLLM` inside the process."""

    def __init__(
        self,
        replies: Sequence[Reply] = (),
        *,
        responder: Responder | None = None,
        default: Reply | None = None,
        models: Sequence[str] = ("fake-model:latest",),
        context_length: int = 32768,
        capabilities: Mapping[str, Sequence[str]] | None = None,
        only_listed: bool = False,
    ) -> None:
        self._queue: deque[Reply] = deque(replies)
        self.responder = responder
        self.default = default
        self.models = list(models)
        # The models' trained window: /api/show, the /v1/models entries, /props.
        self.context_length = context_length
        # /api/show's "capabilities" per model (else ["completion"]).
        self.capabilities = {k: list(v) for k, v in (capabilities or {}).items()}
        # As Ollama does: a chat with a model it does not list answers 404.
        self.only_listed = only_listed
        self.received: list[RecordedRequest] = []
        self.requests: list[dict[str, Any]] = []
        self.disconnects = 0
        self.completed = 0
        self._changed: anyio.Event | None = None

    # ------------------------------------------------------------ driving it

    def script(self, *replies: Reply | Sequence[Reply]) -> None:
        """Queue replies (each consumed by one chat request, in order)."""
        for item in replies:
            if isinstance(item, Reply):
                self._queue.append(item)
            else:
                self._queue.extend(item)

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        return len(self._queue)

    def reset(self) -> None:
        """As if new: no scripted reply left, no request recorded, the counters at 0
        (for a server that several tests share, each from a clean slate)."""
        self._queue.clear()
        self.received.clear()
        self.requests.clear()
        self.disconnects = 0
        self.completed = 0
        self._notify()

    async def wait_for_requests(self, count: int) -> None:
        """Until ``count`` chat requests have arrived (use with ``anyio.fail_after``)."""
        await self._wait_until(lambda: len(self.requests) >= count)

    async def wait_for_disconnects(self, count: int = 1) -> None:
        """Until ``count`` answers were abandoned by the client."""
        await self._wait_until(lambda: self.disconnects >= count)

    async def _wait_until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _next_reply(self, request: RecordedRequest) -> Reply | None:
        if self._queue:
            return self._queue.popleft()
        if self.responder is not None:
            return self.responder(request)
        return self.default


class FakeLLMServer(ScriptedLLM, AbstractAsyncContextManager["FakeLLMServer"]):
    """The script served over HTTP on 127.0.0.1 (``port`` 0: any free one)."""

    def __init__(
        self, replies: Sequence[Reply] = (), *, port: int = 0, api_key: str = "", **script: Any
    ) -> None:
        super().__init__(replies, **script)
        self._port = port
        # Set: the OpenAI routes (/v1/…) answer 401 without "Authorization: Bearer <key>".
        self.api_key = api_key
        self._task_group: anyio.abc.TaskGroup | None = None
        self._listener: anyio.abc.Listener[anyio.abc.SocketStream] | None = None
        self.url = ""
        self.port = 0

    # ------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> FakeLLMServer:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=self._port)
        self._listener = listener
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        self.url = f"http://127.0.0.1:{self.port}"
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(listener.serve, self._serve_connection)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._task_group is not None and self._listener is not None
        self._task_group.cancel_scope.cancel()
        try:
            return await self._task_group.__aexit__(exc_type, exc, tb)
        finally:
            await self._listener.aclose()

    async def serve_forever(self) -> None:
        """For the process mode: serve until cancelled."""
        async with self:
            await anyio.sleep_forever()

    @classmethod
    @contextmanager
    def in_thread(cls, *args: Any, **kwargs: Any) -> Iterator[FakeLLMServer]:
        """Run a server on its own event loop in a background thread."""
        with anyio.from_thread.start_blocking_portal() as portal:
            server = cls(*args, **kwargs)
            with portal.wrap_async_context_manager(server):
                yield server

    # ------------------------------------------------------------ HTTP

    async def _serve_connection(self, client: anyio.abc.SocketStream) -> None:
        async with client:
            reader = BufferedByteReceiveStream(client)
            while True:
                try:
                    request = await self._read_request(reader)
                except _CLIENT_GONE:
                    return
                except anyio.DelimiterNotFound:
                    await _send_json(client, 400, {"error": "request head too long"}, close=True)
                    return
                except _BadRequest as exc:
                    await _send_json(client, 400, {"error": str(exc)}, close=True)
                    return
                keep_alive = await self._dispatch(client, request)
                if not keep_alive or request.headers.get("connection", "").lower() == "close":
                    return

    async def _read_request(self, reader: BufferedByteReceiveStream) -> RecordedRequest:
        head = await reader.receive_until(b"\r\n\r\n", MAX_HEADER_BYTES)
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, _version = lines[0].split(" ", 2)
        except ValueError:
            raise _BadRequest(f"malformed request line: {lines[0]!r}") from None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise _BadRequest(f"malformed header line: {line!r}")
            headers[name.strip().lower()] = value.strip()
        try:
            raw = await _read_body(reader, headers)
        except ValueError:
            raise _BadRequest("malformed Content-Length or chunk size") from None
        body: Any = None
        if raw:
            try:
                body = msgspec.json.decode(raw)
            except msgspec.DecodeError as exc:
                body = _BadBody(f"the request body is not valid JSON: {exc}")
        return RecordedRequest(method=method, path=target.split("?")[0], headers=headers, body=body)

    async def _dispatch(self, client: anyio.abc.SocketStream, request: RecordedRequest) -> bool:
        self.received.append(request)
        route = (request.method, request.path)
        if isinstance(request.body, _BadBody):
            return await _send_json(client, 400, {"error": request.body.message})
        wanted = f"Bearer {self.api_key}"
        if (
            self.api_key
            and request.path.startswith("/v1/")
            and (request.headers.get("authorization") != wanted)
        ):
            error = {"message": "Incorrect API key provided.", "type": "invalid_request_error"}
            return await _send_json(client, 401, {"error": error})
        if route == ("GET", "/"):
            return await _send(client, 200, "text/plain; charset=utf-8", b"Ollama is running")
        if route == ("GET", "/api/version"):
            return await _send_json(client, 200, {"version": "0.12.6"})
        if route == ("GET", "/api/tags"):
            return await _send_json(client, 200, {"models": [model_tag(m) for m in self.models]})
        if route in (("GET", "/v1/models"), ("GET", "/models")):
            data = [
                {
                    "id": m,
                    "object": "model",
                    "created": 1735689600,
                    "owned_by": "fake",
                    "max_model_len": self.context_length,  # as vLLM tells it
                }
                for m in self.models
            ]
            return await _send_json(client, 200, {"object": "list", "data": data})
        if route == ("POST", "/api/show"):
            return await self._show(client, request)
        if route == ("GET", "/props"):  # llama.cpp's server
            settings = {"n_ctx": self.context_length}
            return await _send_json(client, 200, {"default_generation_settings": settings})
        if route == ("POST", "/api/chat"):
            return await self._chat(client, request, wire="ollama")
        if route in (("POST", "/v1/chat/completions"), ("POST", "/chat/completions")):
            return await self._chat(client, request, wire="openai")
        if route == ("POST", "/_fake/script"):
            try:
                self.script(_replies.decode(_encode(request.body)))
            except msgspec.DecodeError as exc:
                return await _send_json(client, 400, {"error": f"bad script: {exc}"})
            return await _send_json(client, 200, {"pending": self.pending})
        if route == ("POST", "/_fake/reset"):
            self.reset()
            return await _send_json(client, 200, {"pending": self.pending})
        if route == ("GET", "/_fake/requests"):
            return await _send_json(client, 200, self.requests)
        if route == ("GET", "/_fake/state"):
            state = {
                "pending": self.pending,
                "requests": len(self.requests),
                "disconnects": self.disconnects,
                "completed": self.completed,
            }
            return await _send_json(client, 200, state)
        return await _send_json(client, 404, {"error": f"no route {request.method} {request.path}"})

    async def _show(self, client: anyio.abc.SocketStream, request: RecordedRequest) -> bool:
        """Ollama's ``POST /api/show``: the model's details, with its trained window."""
        body = request.body if isinstance(request.body, dict) else {}
        name = str(body.get("model") or body.get("name") or "")
        if not _listed(name, self.models):
            return await _send_json(client, 404, {"error": f"model '{name}' not found"})
        info = {"general.architecture": "fake", "fake.context_length": self.context_length}
        details = model_tag(name)["details"]
        capabilities = self.capabilities.get(name, ["completion"])
        return await _send_json(
            client, 200, {"details": details, "model_info": info, "capabilities": capabilities}
        )

    async def _chat(
        self, client: anyio.abc.SocketStream, request: RecordedRequest, *, wire: str
    ) -> bool:
        body = request.body if isinstance(request.body, dict) else {}
        self.requests.append(body)
        number = len(self.requests)
        self._notify()
        reply = self._next_reply(request)
        error_body = ollama_error_body if wire == "ollama" else _openai_error_500
        if reply is None:
            message = (
                f"fake LLM server: no scripted reply left for chat request #{number} "
                "(queue more with fake.script(...))"
            )
            return await _send_json(client, 500, error_body(message))
        model = str(body.get("model") or "fake-model")
        if self.only_listed and wire == "ollama" and not _listed(model, self.models):
            # Ollama's words and status for a model it does not have.
            message = f'model "{model}" not found, try pulling it first'
            return await _send_json(client, 404, {"error": message})
        if reply.delay_first and await _pause(client, reply.delay_first):
            return self._gone()
        if reply.error_before is not None:
            message = reply.error_before.replace("{model}", model)
            payload = (
                ollama_error_body(message)
                if wire == "ollama"
                else openai_error_body(message, reply.error_status)
            )
            return await _send_json(client, reply.error_status, payload)
        streaming = body.get("stream", wire == "ollama") is not False
        if not streaming:
            whole = ollama_whole if wire == "ollama" else openai_whole
            ok = await _send_json(client, 200, whole(reply, model=model, request_number=number))
            self.completed += ok
            return ok
        content_type = "application/x-ndjson" if wire == "ollama" else "text/event-stream"
        if reply.raw_body is not None or reply.empty_body:
            raw = (reply.raw_body or "").encode()
            rendered = Rendered(content_type=content_type, chunks=[raw] if raw else [], tail=[])
        elif wire == "ollama":
            rendered = render_ollama(reply, model=model, request_number=number)
        else:
            rendered = render_openai(reply, model=model, request_number=number)
        return await self._stream(client, reply, rendered)

    async def _stream(
        self, client: anyio.abc.SocketStream, reply: Reply, rendered: Rendered
    ) -> bool:
        chunks = rendered.chunks
        cuts = [c for c in (reply.stall_after, reply.drop_after, reply.end_after) if c is not None]
        cut = min(min(cuts), len(chunks)) if cuts else None
        events = chunks[:cut] if cut is not None else chunks + rendered.tail
        head = (
            "HTTP/1.1 200 OK\r\n"
            f"Content-Type: {rendered.content_type}\r\n"
            "Cache-Control: no-cache\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        ).encode()
        try:
            await client.send(head)
            index = 0
            while index < len(events):
                if reply.delay and index > 0 and await _pause(client, reply.delay):
                    return self._gone()
                end = index + 1 if reply.delay else min(len(events), index + BATCH)
                payload = b"".join(events[index:end])
                await client.send(b"%x\r\n%b\r\n" % (len(payload), payload))
                index = end
            if cut is not None and cut == reply.stall_after:
                await _pause(client, float("inf"))
                return self._gone()
            if cut is not None and cut == reply.drop_after:
                return self._gone(count=False)
            await client.send(b"0\r\n\r\n")
        except _CLIENT_GONE:
            return self._gone()
        self.completed += 1
        return True

    def _gone(self, *, count: bool = True) -> bool:
        """The answer ended early; the connection is not reused."""
        if count:
            self.disconnects += 1
            self._notify()
        return False


async def _read_body(reader: BufferedByteReceiveStream, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts: list[bytes] = []
        while True:
            size = int((await reader.receive_until(b"\r\n", 1024)).split(b";")[0], 16)
            if size == 0:
                await reader.receive_until(b"\r\n", 1024)
                return b"".join(parts)
            parts.append(await reader.receive_exactly(size))
            await reader.receive_exactly(2)
    if headers.get("content-length"):
        return await reader.receive_exactly(int(headers["content-length"]))
    return b""


class _BadBody:
    def __init__(self, message: str) -> None:
        self.message = message


def _openai_error_500(message: str) -> dict[str, Any]:
    return openai_error_body(message, 500)


def _listed(name: str, models: Sequence[str]) -> bool:
    return name in models or f"{name}:latest" in models


def model_tag(name: str) -> dict[str, Any]:
    """A model as Ollama's ``/api/tags`` lists it."""
    return {
        "name": name,
        "model": name,
        "modified_at": "2025-01-01T00:00:00.000000000Z",
        "size": 1_000_000,
        "digest": "0" * 64,
        "details": {
            "parent_model": "",
            "format": "gguf",
            "family": "fake",
            "families": ["fake"],
            "parameter_size": "1M",
            "quantization_level": "Q4_0",
        },
    }


async def _pause(client: anyio.abc.SocketStream, seconds: float) -> bool:
    """Wait ``seconds``; True as soon as the client hangs up."""
    with anyio.move_on_after(seconds):
        while True:
            try:
                await client.receive()
            except _CLIENT_GONE:
                return True
    return False


async def _send(
    client: anyio.abc.SocketStream,
    status: int,
    content_type: str,
    body: bytes,
    *,
    close: bool = False,
) -> bool:
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n" + ("Connection: close\r\n" if close else "") + "\r\n"
    ).encode()
    try:
        await client.send(head + body)
    except _CLIENT_GONE:
        return False
    return not close


async def _send_json(
    client: anyio.abc.SocketStream, status: int, value: Any, *, close: bool = False
) -> bool:
    return await _send(
        client, status, "application/json; charset=utf-8", _encode(value), close=close
    )


# ---------------------------------------------------------------- process mode


def load_script(path: str | Path) -> list[Reply]:
    """A JSON file holding a list of replies (the fields of :class:`Reply`)."""
    return _replies.decode(Path(path).read_bytes())


class FakeLLMProcess:
    """``python -m tests.support.fake_llm`` as a subprocess, driven over HTTP."""

    def __init__(
        self,
        replies: Sequence[Reply] = (),
        *,
        default_text: str | None = None,
        script_file: Path | None = None,
    ) -> None:
        self._replies = list(replies)
        self._default_text = default_text
        self._script_file = script_file
        self._process: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> FakeLLMProcess:
        args = [sys.executable, "-m", "tests.support.fake_llm", "--port", "0"]
        if self._default_text is not None:
            args += ["--default-text", self._default_text]
        if self._script_file is not None:
            args += ["--script", str(self._script_file)]
        root = Path(__file__).resolve().parents[2]
        self._process = subprocess.Popen(
            args, cwd=root, stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if "listening on" not in line:
            self._process.kill()
            raise RuntimeError(f"the fake LLM process did not start: {line!r}")
        self.url = line.rsplit(" ", 1)[1].strip()
        if self._replies:
            self.script(*self._replies)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            if self._process.stdout is not None:
                self._process.stdout.close()

    @property
    def pid(self) -> int:
        assert self._process is not None, "not started"
        return self._process.pid

    def script(self, *replies: Reply) -> None:
        self._call("POST", "/_fake/script", msgspec.json.encode(list(replies)))

    def reset(self) -> None:
        """Drops the replies not used yet and the recorded requests (see FakeLLMServer.reset)."""
        self._call("POST", "/_fake/reset")

    @property
    def requests(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = json.loads(self._call("GET", "/_fake/requests"))
        return result

    @property
    def state(self) -> dict[str, int]:
        result: dict[str, int] = json.loads(self._call("GET", "/_fake/state"))
        return result

    def _call(self, method: str, path: str, body: bytes | None = None) -> bytes:
        import httpx

        response = httpx.request(
            method,
            self.url + path,
            content=body,
            headers={"content-type": "application/json"},
            timeout=10,
        )
        response.raise_for_status()
        return response.content


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted fake LLM server (Ollama + OpenAI).")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", help="JSON file with a list of replies")
    parser.add_argument("--default-text", help="answer this when the script is used up")
    parser.add_argument("--models", default="fake-model:latest", help="comma-separated names")
    parser.add_argument("--context-length", type=int, default=32768, help="the models' window")
    parser.add_argument("--tools-models", default="", help="models whose /api/show has tools")
    parser.add_argument("--only-listed", action="store_true", help="404 for other models")
    args = parser.parse_args(argv)
    tools = [m for m in args.tools_models.split(",") if m]
    replies = load_script(args.script) if args.script else []
    default = Reply(text=args.default_text) if args.default_text is not None else None
    server = FakeLLMServer(
        replies,
        default=default,
        models=args.models.split(","),
        port=args.port,
        context_length=args.context_length,
        capabilities={m: ["completion", "tools"] for m in tools},
        only_listed=args.only_listed,
    )

    async def run() -> None:
        async with server:
            print(f"fake-llm listening on {server.url}", flush=True)
            await anyio.sleep_forever()

    with suppress(KeyboardInterrupt):
        anyio.run(run)


if __name__ == "__main__":
    main()
