"""The fake LLM of the chaos suite: long multi-tool runs, scripted by the user message.

A run's message carries its script::

    chaos: tag=T steps=6 calls=2 sleep=0.1 sub=1 compress=1 stall=2 dead=0

and the reply to any chat request is a function of the conversation only, so an LLM
call re-issued after a crash gets the same answer: step ``i`` (one more than the
highest step whose tool calls are in the conversation) asks for ``calls`` tool calls
with the tokens ``T-i-0``, ``T-i-1``, … alternating ``touch`` (idempotent) and
``mark`` (not idempotent); after ``steps`` steps it answers "done T". With ``sub=1``
step 0 also spawns a subagent running ``steps=2 calls=1`` under the tag ``Ts``. With
``compress=1`` some replies report a prompt near the context limit, so that Navi
compresses (the summary carries the script and the last step forward). ``delay``:
seconds between streamed pieces (0.01). ``stall=i``:
the first request for step ``i`` stalls mid-stream (once per process); ``dead=1``:
every request stalls; ``hang=1``: step 0 runs ``code_exec`` with a process that
ignores SIGTERM and sleeps (its pid in ``hang.pid`` in the session's files). A run's tag must not end with "s" (a subagent's does).

    python -m tests.chaos.llm --port 0     # prints "fake-llm listening on URL"
"""

from __future__ import annotations

import argparse
import re
from contextlib import suppress
from typing import Any

import anyio

from tests.support.fake_llm import FakeLLMServer, FakeToolCall, RecordedRequest, Reply

SPEC = re.compile(r"chaos: tag=(?P<tag>[\w.-]+)(?P<rest>[^\n]*)")
FIELD = re.compile(r"(\w+)=([\w.]+)")
SUMMARY_SYSTEM_START = "You compress the earlier part"
# OLLAMA_NUM_CTX the chaos servers run with; 0.8 of it triggers a compression.
NUM_CTX = 4096
WORDS = [f"{w} " for w in ("working", "on", "it", "step", "by", "step", "and", "keeping")]

HANG = """\
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(os.path.join(os.environ["NAVI_FILES_DIR"], "hang.pid"), "w") as f:
    f.write(str(os.getpid()))
time.sleep(120)
"""

_stalled: set[str] = set()


def spec_line(tag: str, **fields: object) -> str:
    rest = " ".join(f"{k}={v}" for k, v in fields.items())
    return f"chaos: tag={tag} {rest}".strip()


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    parts = [content if isinstance(content, str) else str(content)]
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append(f"{function.get('name')} {function.get('arguments')}")
    return "\n".join(parts)


def _script(messages: list[dict[str, Any]]) -> tuple[str, dict[str, float]] | None:
    """The script of the run: the last one the user (or a summary) gave; the scripts
    a parent gives its subagents are in its tool calls, not its own."""
    found = None
    for message in messages:
        if message.get("role") not in ("user", "system"):
            continue
        for match in SPEC.finditer(_text(message)):
            found = match
    if found is None:
        return None
    fields = {k: float(v) for k, v in FIELD.findall(found.group("rest"))}
    return found.group("tag"), fields


def _next_step(tag: str, messages: list[dict[str, Any]]) -> int:
    token = re.compile(rf"\b{re.escape(tag)}-(\d+)-\d+\b")
    done = -1
    for message in messages:
        if message.get("role") == "assistant" or "reached:" in _text(message):
            for match in token.finditer(_text(message)):
                done = max(done, int(match.group(1)))
    return done + 1


def _summary(messages: list[dict[str, Any]]) -> Reply:
    text = "\n".join(_text(m) for m in messages[1:])
    lines = ["- the user runs a chaos script"]
    # A parent's own script, not one of its subagents' (their tags end with "s").
    specs = sorted(SPEC.findall(text), key=lambda spec: not spec[0].endswith("s"))
    if specs:
        tag, rest = specs[-1]
        lines.append(f"- chaos: tag={tag}{rest}")
        steps = [int(s) for s in re.findall(rf"\b{re.escape(tag)}-(\d+)-\d+\b", text)]
        if steps:
            lines.append(f"- reached: {tag}-{max(steps)}-0")
    return Reply(text="\n".join(lines), delay_first=0.2)


def chaos_reply(request: RecordedRequest) -> Reply:
    body = request.body if isinstance(request.body, dict) else {}
    messages: list[dict[str, Any]] = body.get("messages") or []
    if messages and str(messages[0].get("content", "")).startswith(SUMMARY_SYSTEM_START):
        return _summary(messages)
    script = _script(messages)
    if script is None:
        return Reply(text="ok")
    tag, spec = script
    step = _next_step(tag, messages)
    steps = int(spec.get("steps", 3))
    if spec.get("dead"):
        return Reply(text=WORDS[:4], delay=0.01, stall_after=2)
    stall_at = spec.get("stall")
    if stall_at is not None and step == int(stall_at) and f"{tag}/{step}" not in _stalled:
        _stalled.add(f"{tag}/{step}")
        return Reply(text=WORDS[:6], delay=0.01, stall_after=3)
    words = WORDS[: 4 + step % 6]
    delay = spec.get("delay", 0.01)
    if step >= steps:
        return Reply(text=[*words, f" done {tag}"], delay=delay)
    calls = []
    sleep = spec.get("sleep", 0.0)
    for j in range(int(spec.get("calls", 2))):
        name = "touch" if j % 2 == 0 else "mark"
        calls.append(
            FakeToolCall(name=name, arguments={"token": f"{tag}-{step}-{j}", "sleep": sleep})
        )
    if spec.get("hang") and step == 0:  # a tool process that ignores SIGTERM
        calls = [FakeToolCall(name="code_exec", arguments={"code": HANG, "timeout_s": 120})]
    if spec.get("sub") and step == 0:
        task = spec_line(f"{tag}s", steps=2, calls=1, sleep=sleep)
        calls.append(FakeToolCall(name="spawn_agent", arguments={"task": task}))
    prompt_tokens = 10
    if spec.get("compress") and step % 3 == 1:
        prompt_tokens = int(NUM_CTX * 0.9)
    return Reply(
        thinking=["planning ", f"step {step}"],
        text=words,
        tool_calls=calls,
        delay=delay,
        prompt_tokens=prompt_tokens,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="The chaos suite's fake LLM.")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = FakeLLMServer(responder=chaos_reply, port=args.port)

    async def run() -> None:
        async with server:
            print(f"fake-llm listening on {server.url}", flush=True)
            await anyio.sleep_forever()

    with suppress(KeyboardInterrupt):
        anyio.run(run)


if __name__ == "__main__":
    main()
