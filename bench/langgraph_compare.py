"""Navi against LangGraph, side by side in one sitting: the same scripted fake LLM over HTTP
(OpenAI's wire, ``/v1/chat/completions`` streamed as SSE, from its own process), driven by

- **Navi**: a real ``navi serve`` (SQLite, every event persisted) and a WebSocket client;
- **LangGraph** in this process: a ``StateGraph`` tool loop (an agent node calling the
  model with the tool bound, a ``ToolNode``, ``tools_condition``), without a checkpointer
  and with ``langgraph-checkpoint-sqlite``'s ``AsyncSqliteSaver`` on a file; the model is
  ``langchain-openai``'s ``ChatOpenAI`` (``streaming=True``: the OpenAI SDK underneath)
  and, as ``langgraph_lean``, a minimal chat model reading the same wire with httpx
  (bench/_lean_chat_model.py: LangGraph's own cost, without the SDK's).

Two figures, alternated ``--rounds`` times (a shared machine's load hits both alike):

- **per tool iteration**: a turn of ``--iterations`` LLM calls (all but the last call the
  trivial ``todo`` tool with ``{"action": "read"}``, the last answers), message sent ->
  answer received, divided by the iterations; median over ``--sessions`` turns per round.
- **streaming**: one answer of ``--chunks`` chunks ("tok " each) as fast as the fake sends
  (it writes up to 512 chunks per write, as in bench/stream.py), counted at the client
  (Navi: WebSocket frames; LangGraph: ``astream(stream_mode="messages")``), first to last.

Issue 34's goal: Navi >= 2.5x faster per tool iteration than LangGraph without
persistence, and >= 4x its streaming rate, while persisting every chunk.

    .venv/bin/python bench/langgraph_compare.py [--rounds 3] [--sessions 10]
        [--iterations 20] [--chunks 20000]

Needs the ``bench`` extra (``pip install -e '.[bench]'``: langgraph,
langgraph-checkpoint-sqlite, langchain-openai); without it, it says it skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from websockets.asyncio.client import connect

from _common import ROOT, report
from live_sessions import server_env, start, uptime, wait_up
from tests.support.fake_llm import FakeLLMProcess, FakeToolCall, Reply
from tests.support.navi_server import free_port

CALL = Reply(tool_calls=[FakeToolCall(name="todo", arguments={"action": "read"})])
ANSWER = Reply(text="Done: all steps read.")
PROMPT = "Read the todo list over and over."
CHUNK = "tok "
MODEL = "fake-model:latest"


# ---------------------------------------------------------------- Navi


async def navi_turn(base: str, ws_base: str, content: str) -> tuple[float, int, float]:
    """One turn in a new session: (seconds from send to stream_end, chunks received,
    seconds from the first delta to the last)."""
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        sid = (await http.post("/sessions", json={})).json()["session_id"]
    async with connect(f"{ws_base}/ws/sessions/{sid}", max_size=None) as ws:
        t0 = time.perf_counter()
        await ws.send(json.dumps({"type": "message", "content": content}))
        chunks, first, last = 0, 0.0, 0.0
        while True:
            frame = json.loads(await ws.recv())
            if frame["type"] == "stream_delta":
                chunks += frame["delta"].count(CHUNK)
                last = time.perf_counter()
                first = first or last
            elif frame["type"] in ("stream_end", "stream_stopped"):
                return time.perf_counter() - t0, chunks, last - first
            elif frame["type"] == "error" and not frame.get("fatal"):
                raise RuntimeError(frame)


# ---------------------------------------------------------------- LangGraph


def build_graph(
    llm_url: str, checkpointer: Any = None, http: httpx.AsyncClient | None = None
) -> Any:
    """The tool loop; on ``ChatOpenAI``, or on the lean model when ``http`` is given."""
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    from _lean_chat_model import LeanChatModel
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    @tool
    def todo(action: str) -> str:
        """Read or change the todo list."""
        return "The todo list is empty."

    chat: Any = (
        LeanChatModel(model=MODEL, base_url=f"{llm_url}/v1", http=http)
        if http is not None
        else ChatOpenAI(
            model=MODEL, base_url=f"{llm_url}/v1", api_key="unused", streaming=True, max_retries=0
        )
    )
    model = chat.bind_tools([todo])

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([todo]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


async def langgraph_turn(graph: Any, thread: str, content: str) -> tuple[float, int, float]:
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 1000}
    t0 = time.perf_counter()
    chunks, first, last = 0, 0.0, 0.0
    async for message, _meta in graph.astream(
        {"messages": [("user", content)]}, config, stream_mode="messages"
    ):
        text = message.content if isinstance(message.content, str) else ""
        if text:
            chunks += text.count(CHUNK)
            last = time.perf_counter()
            first = first or last
    return time.perf_counter() - t0, chunks, last - first


# ---------------------------------------------------------------- the sitting


async def sitting(args: argparse.Namespace, tmp: Path) -> dict[str, list[float]]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    results: dict[str, list[float]] = {}
    with FakeLLMProcess() as fake:
        port = free_port()
        base, ws_base = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}"
        env = server_env(tmp, fake.url, f"sqlite:///{tmp / 'navi.db'}", "default")
        env.update(
            NAVI_LLM_BACKEND="openai",
            OPENAI_BASE_URL=f"{fake.url}/v1",
            OPENAI_MODEL=MODEL,
            NAVI_TOOL_APPROVAL="auto",
        )
        (tmp / "cwd").mkdir()
        log_path = tmp / "serve.log"
        server = start(
            [sys.executable, "-m", "navi.cli", "serve", "--port", str(port)],
            log=log_path,
            cwd=tmp / "cwd",
            env=env,
        )
        try:
            await wait_up(base, server, log_path)
            async with (
                AsyncSqliteSaver.from_conn_string(str(tmp / "lg.db")) as saver,
                httpx.AsyncClient(timeout=120) as http,
            ):
                graphs = {
                    "langgraph": build_graph(fake.url),
                    "langgraph_sqlite": build_graph(fake.url, saver),
                    "langgraph_lean": build_graph(fake.url, http=http),
                    "langgraph_lean_sqlite": build_graph(fake.url, saver, http=http),
                }
                turns: dict[str, Any] = {"navi": lambda i, c: navi_turn(base, ws_base, c)}
                for name, graph in graphs.items():
                    turns[name] = lambda i, c, g=graph, n=name: langgraph_turn(g, f"{n}{i}", c)
                # One untimed turn each: connections, caches, imports.
                for name, turn in turns.items():
                    fake.script(CALL, ANSWER)
                    await turn(f"warm-{name}", PROMPT)
                for r in range(args.rounds):
                    for name, turn in turns.items():
                        per_iteration = []
                        for s in range(args.sessions):
                            fake.script(*[CALL] * (args.iterations - 1), ANSWER)
                            seconds, _, _ = await turn(f"{r}-{s}", PROMPT)
                            per_iteration.append(seconds / args.iterations * 1000)
                        ms = statistics.median(per_iteration)
                        results.setdefault(f"{name}_ms_per_iteration", []).append(ms)
                        fake.script(Reply(text=[CHUNK] * args.chunks))
                        _, chunks, seconds = await turn(f"{r}-stream", "stream")
                        if chunks != args.chunks:
                            raise RuntimeError(f"{name}: {chunks} of {args.chunks} chunks")
                        rate = chunks / seconds
                        results.setdefault(f"{name}_chunks_per_s", []).append(rate)
                        print(
                            f"  round {r + 1} {name:21} {ms:6.2f} ms per iteration, "
                            f"{rate:8,.0f} chunks/s",
                            flush=True,
                        )
        finally:
            server.terminate()
            server.wait(20)
    return results


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=10, help="turns per round and side")
    parser.add_argument("--iterations", type=int, default=20, help="LLM calls per turn")
    parser.add_argument("--chunks", type=int, default=20_000)
    args = parser.parse_args()
    try:
        import langchain_openai  # noqa: F401
        import langgraph.checkpoint.sqlite  # noqa: F401
    except ImportError as exc:
        print(f"skipped: langgraph not installed ({exc.name}; pip install -e '.[bench]')")
        report({"skipped": True})
        return
    before = uptime()
    print(f"Navi vs LangGraph, {args.rounds} rounds; before: {before}")
    with tempfile.TemporaryDirectory() as tmp:
        results = await sitting(args, Path(tmp))
    figures: dict[str, Any] = {}
    for key, values in results.items():
        figures[key] = statistics.median(values)
        figures[key + "_range"] = [round(min(values), 3), round(max(values), 3)]
    navi = figures["navi_ms_per_iteration"]
    navi_rate = figures["navi_chunks_per_s"]
    print(
        f"per tool iteration (median of rounds): Navi {navi:.2f} ms; streaming {navi_rate:,.0f} "
        f"chunks/s, each persisted"
    )
    for name in ("langgraph", "langgraph_sqlite", "langgraph_lean", "langgraph_lean_sqlite"):
        ms, rate = figures[f"{name}_ms_per_iteration"], figures[f"{name}_chunks_per_s"]
        figures[f"loop_speedup_vs_{name}"] = ms / navi
        figures[f"stream_speedup_vs_{name}"] = navi_rate / rate
        print(
            f"  {name:21} {ms:6.2f} ms per iteration (Navi x{ms / navi:.2f}), "
            f"{rate:8,.0f} chunks/s (Navi x{navi_rate / rate:.2f})"
        )
    print(
        "  goals (issue 34), against LangGraph without persistence: x2.5 per iteration, x4 streaming"
    )
    figures["load"] = os.getloadavg()[0]
    figures["uptime_before"] = before
    print(f"load after {figures['load']:.2f}")
    report(figures)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    anyio.run(main)
