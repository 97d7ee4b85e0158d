"""A fake Ollama that streams like a real model, for the load benchmarks (not a benchmark
itself): one chunk per write, paced (50 chunks/s by default), each chunk carrying the
time it was sent.

It is :class:`tests.support.fake_llm.FakeLLMServer` (Ollama's wire, byte for byte) with
its streaming replaced: every chunk is its own HTTP chunk, sent at ``start + i * delay``
(a deadline, so a late wake-up does not slow the whole reply down; a fake that cannot
keep up shows as a lower chunk rate), and the text of each chunk is ``T<epoch> `` with
the wall-clock time of the write, so a client can compute the LLM -> frame latency of
every chunk from the text it receives.

    python bench/_paced_fake.py --chunks 200 --delay 0.02

prints ``fake-llm listening on http://127.0.0.1:PORT``; every chat request gets the same
paced reply.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from contextlib import suppress
from pathlib import Path

import anyio
import anyio.abc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.fake_llm import (
    _CLIENT_GONE,
    FakeLLMServer,
    Reply,
    _pause,
)
from tests.support.fake_llm_script import Rendered

# "T" + 17 characters of "%.6f" of the epoch (good until the year 2286) + " ".
PLACEHOLDER = "T" + "@" * 17 + " "
_HOLE = b"@" * 17
STAMP = re.compile(r"T(\d{10}\.\d{6}) ")


def stamps(text: str) -> list[float]:
    """The send times of the chunks in a (possibly merged) delta."""
    return [float(m) for m in STAMP.findall(text)]


class PacedFake(FakeLLMServer):
    async def _stream(
        self, client: anyio.abc.SocketStream, reply: Reply, rendered: Rendered
    ) -> bool:
        events = rendered.chunks + rendered.tail
        head = (
            "HTTP/1.1 200 OK\r\n"
            f"Content-Type: {rendered.content_type}\r\n"
            "Cache-Control: no-cache\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        ).encode()
        try:
            await client.send(head)
            start = time.monotonic()
            for index, event in enumerate(events):
                wait = start + index * reply.delay - time.monotonic()
                if index and wait > 0 and await _pause(client, wait):
                    return self._gone()
                payload = event.replace(_HOLE, b"%.6f" % time.time(), 1)
                await client.send(b"%x\r\n%b\r\n" % (len(payload), payload))
            await client.send(b"0\r\n\r\n")
        except _CLIENT_GONE:
            return self._gone()
        self.completed += 1
        return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.02, help="seconds between chunks")
    args = parser.parse_args()
    reply = Reply(text=[PLACEHOLDER] * args.chunks, delay=args.delay)
    server = PacedFake(default=reply, port=args.port)

    async def run() -> None:
        async with server:
            print(f"fake-llm listening on {server.url}", flush=True)
            await anyio.sleep_forever()

    with suppress(KeyboardInterrupt):
        anyio.run(run)


if __name__ == "__main__":
    main()
