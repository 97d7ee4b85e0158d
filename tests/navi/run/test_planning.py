"""Planning before the tool loop: real Navi, SQLite, the fake LLM server over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from events.envelope import NewEvent, Recorded
from events.factory import store_for_url
from events.types import (
    TERMINAL_RUN_EVENTS,
    ContextInjected,
    LLMRequested,
    PlanReady,
    PlanStatus,
    RunStopped,
    TodoUpdated,
)
from navi.app import Navi
from navi.run.planning import (
    PHASE1_SYSTEM,
    PHASE2_SYSTEM,
    PlanStep,
    has_steps,
    is_direct,
    parse_steps,
    wants_reflection,
)
from projections import messages as messages_projection
from projections.context import CONTEXT
from projections.fold import fold
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import FakeToolCall, RecordedRequest, Reply
from tests.support.navi_app import navi_settings, open_navi, run_stream

PLAN = """MILESTONES:
- The facts are known
STEPS:
1. Search the web for the opening hours — TOOL: web_search
2. Research the ticket prices — AGENT: secretary
3) Tell the user the result — SELF
"""
ANALYSIS_REFLECT = "ANALYSIS: The user wants a museum visit planned.\nREFLECT: yes"
ANALYSIS_PLAIN = "ANALYSIS: The user wants a museum visit planned.\nREFLECT: no"


def kind_of(body: dict[str, Any]) -> str:
    """Which call this is: a planning phase or the tool loop."""
    system = body["messages"][0]["content"]
    if system == PHASE1_SYSTEM:
        return "phase1"
    if system == PHASE2_SYSTEM:
        return "phase2"
    if system.startswith("You are the planning module of an AI assistant. Write the plan"):
        return "phase3"
    return "loop"


def kinds(fake: FakeLLM) -> list[str]:
    return [kind_of(body) for body in fake.requests]


async def run_to_end(navi: Navi, session: str, text: str) -> list[Recorded]:
    seen = []
    with anyio.fail_after(20):
        async for record in run_stream(navi, session, text):
            seen.append(record)
    return seen


def planning_on(tmp_path: Path, url: str, **overrides: Any) -> Any:
    return navi_settings(tmp_path, url, planning="on", **overrides)


# ---------------------------------------------------------------- parsing


def test_steps_and_their_executors_are_parsed() -> None:
    assert has_steps(PLAN)
    assert parse_steps(PLAN) == [
        PlanStep("Search the web for the opening hours", "TOOL: web_search"),
        PlanStep("Research the ticket prices", "AGENT: secretary"),
        PlanStep("Tell the user the result", "SELF"),
    ]
    assert parse_steps("1. **Read the file** (TOOL: filesystem)\n2. Answer") == [
        PlanStep("Read the file", "TOOL: filesystem"),
        PlanStep("Answer", "SELF"),
    ]


def test_classification_answers() -> None:
    assert is_direct("DIRECT") and is_direct("  **DIRECT**\n")
    assert not is_direct(ANALYSIS_REFLECT)
    assert wants_reflection(ANALYSIS_REFLECT) and not wants_reflection(ANALYSIS_PLAIN)
    assert not wants_reflection("no marker at all")
    assert not has_steps("I will simply do it.\n- a bullet is not a step")


# ---------------------------------------------------------------- end to end


async def test_direct_skips_planning(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(text="DIRECT"), Reply(text="Hello!"))
        async with open_navi(planning_on(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            seen = await run_to_end(navi, session, "Hi")
        types = [r.type for r in seen]
        assert types[:6] == [
            "user.message",
            "run.started",
            "plan.status",
            "llm.requested",
            "llm.completed",
            "llm.requested",
        ]
        assert "plan.ready" not in types and types[-1] == "run.completed"
        status = next(r.event for r in seen if isinstance(r.event, PlanStatus))
        assert (status.phase, status.label) == (1, "Analysing the request")
        plan_call = next(r.event for r in seen if isinstance(r.event, LLMRequested))
        assert plan_call.purpose == "plan"
    first = fake.requests[0]
    assert kinds(fake) == ["phase1", "loop"]
    assert "tools" not in first and first["think"] is False
    assert first["options"]["temperature"] == 0.3
    assert "Hi" in first["messages"][-1]["content"]
    assert fake.requests[1]["tools"]  # the loop is unchanged


async def test_an_answer_without_numbered_steps_is_no_plan(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(
            Reply(text=ANALYSIS_PLAIN),
            Reply(text="I would look it up and answer.\n- step one\n- step two"),
            Reply(text="Here you go."),
        )
        async with open_navi(planning_on(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            seen = await run_to_end(navi, session, "plan my museum visit")
            records = await navi.store.read(session)
        assert kinds(fake) == ["phase1", "phase3", "loop"]
        assert not any(isinstance(r.event, PlanReady | TodoUpdated) for r in seen)
        assert seen[-1].type == "run.completed"
        context = fold(CONTEXT, records).as_list()
        assert [m.role for m in context] == ["user", "assistant"]


async def test_phase_two_reviews_when_enabled_and_asked(tmp_path: Path) -> None:
    review = "MISSING: the date\nRISKS: closed on Mondays\nORDER: hours first\nCHECKS: none"
    async with FakeLLM() as fake:
        fake.script(
            Reply(text=ANALYSIS_REFLECT),
            Reply(text=review),
            Reply(text=PLAN),
            Reply(text="Done."),
        )
        # server_admin has planning_phase2_enabled.
        async with open_navi(planning_on(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("server_admin")
            seen = await run_to_end(navi, session, "plan my museum visit")
        phases = [r.event.phase for r in seen if isinstance(r.event, PlanStatus)]
        assert phases == [1, 2, 3]
    assert kinds(fake) == ["phase1", "phase2", "phase3", "loop"]
    assert ANALYSIS_REFLECT in fake.requests[1]["messages"][-1]["content"]
    phase3_prompt = fake.requests[2]["messages"][-1]["content"]
    assert "closed on Mondays" in phase3_prompt and ANALYSIS_REFLECT in phase3_prompt


async def test_phase_two_is_skipped_when_disabled_or_not_asked(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        # secretary: phase 2 disabled, although phase 1 asks for reflection.
        fake.script(Reply(text=ANALYSIS_REFLECT), Reply(text=PLAN), Reply(text="Done."))
        async with open_navi(planning_on(tmp_path / "a", fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            await run_to_end(navi, session, "plan my museum visit")
        assert kinds(fake) == ["phase1", "phase3", "loop"]
        # server_admin: phase 2 enabled, but phase 1 says REFLECT: no.
        fake.script(Reply(text=ANALYSIS_PLAIN), Reply(text=PLAN), Reply(text="Done."))
        async with open_navi(planning_on(tmp_path / "b", fake.url), llm=fake) as navi:
            session = await navi.create_session("server_admin")
            await run_to_end(navi, session, "plan my museum visit")
        assert kinds(fake)[3:] == ["phase1", "phase3", "loop"]


async def test_a_plan_is_shown_injected_and_fills_the_todo_list(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(text=ANALYSIS_PLAIN), Reply(text=PLAN), Reply(text="All set."))
        async with open_navi(planning_on(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            seen = await run_to_end(navi, session, "plan my museum visit")
            records = await navi.store.read(session)
        types = [r.type for r in seen]
        at = types.index("plan.ready")
        assert types[at + 1] == "todo.updated"
        ready = seen[at].event
        assert isinstance(ready, PlanReady)
        assert ready.steps == (
            "Search the web for the opening hours",
            "Research the ticket prices",
            "Tell the user the result",
        )
        todo = seen[at + 1].event
        assert isinstance(todo, TodoUpdated)
        assert [(i.id, i.executor, i.status) for i in todo.items] == [
            (1, "TOOL: web_search", "pending"),
            (2, "AGENT: secretary", "pending"),
            (3, "SELF", "pending"),
        ]
        shown = fold(messages_projection.MESSAGES, records).messages()
        assert [(m.role, m.is_plan) for m in shown] == [
            ("user", False),
            ("assistant", True),
            ("assistant", False),
        ]
        context = fold(CONTEXT, records).as_list()
        assert context[1].role == "assistant" and context[1].content == PLAN.strip()
    loop = fake.requests[2]["messages"]
    assert loop[-1] == {"role": "assistant", "content": PLAN.strip()}
    phase3_system = fake.requests[1]["messages"][0]["content"]
    assert "comma test" in phase3_system and "- web_search:" in phase3_system
    assert "- secretary:" in phase3_system  # AGENT executors: spawn_agent is offered


async def test_a_failed_step_queues_a_replan(tmp_path: Path) -> None:
    fail_step = FakeToolCall(
        name="todo",
        arguments={"action": "update", "id": 1, "status": "failed", "note": "no network"},
    )
    async with FakeLLM() as fake:
        fake.script(
            Reply(text=ANALYSIS_PLAIN),
            Reply(text=PLAN),
            Reply(tool_calls=[fail_step]),
            Reply(text="I could not search; here is what I know."),
        )
        # server_admin has adaptive_replan_enabled.
        async with open_navi(planning_on(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("server_admin")
            seen = await run_to_end(navi, session, "plan my museum visit")
        replans = [
            r.event
            for r in seen
            if isinstance(r.event, ContextInjected) and r.event.kind == "replan"
        ]
        assert len(replans) == 1
        assert "Search the web for the opening hours: no network" in replans[0].content
    last = fake.requests[-1]["messages"]
    assert any(m["role"] == "system" and "[Re-plan]" in m["content"] for m in last)
    assert not any("[Re-plan]" in m["content"] for m in fake.requests[2]["messages"])


async def test_run_mode_and_disabled_profiles_never_plan(tmp_path: Path) -> None:
    async with FakeLLM(default=Reply(text="Plain answer.")) as fake:
        async with open_navi(planning_on(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            assert await navi.run(session, "plan my museum visit") == "Plain answer."
            types = [r.type for r in await navi.store.read(session)]
        assert "plan.status" not in types
        assert kinds(fake) == ["loop"]
        async with open_navi(
            navi_settings(tmp_path / "off", fake.url, planning="off"), llm=fake
        ) as navi:
            session = await navi.create_session("secretary")
            await run_to_end(navi, session, "plan my museum visit")
        assert kinds(fake) == ["loop", "loop"]


async def test_a_failed_planning_call_means_no_plan(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(error_before="model overloaded", error_status=503), Reply(text="Hi."))
        async with open_navi(planning_on(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            seen = await run_to_end(navi, session, "plan my museum visit")
        types = [r.type for r in seen]
        assert types[2:5] == ["plan.status", "llm.requested", "llm.failed"]
        assert types[-1] == "run.completed" and "plan.ready" not in types


async def test_a_stop_during_planning_stops_the_run(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(text="DIRECT", delay_first=30))
        async with open_navi(planning_on(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            reply = await navi.send(session, "plan my museum visit")
            with anyio.fail_after(10):
                await fake.wait_for_requests(1)
                assert await navi.stop(session)
                end = await navi.wait_for_end(session, reply)
            assert isinstance(end.event, RunStopped)
            types = [r.type for r in await navi.store.read(session)]
        assert "plan.ready" not in types and "llm.completed" not in types
        assert len(fake.requests) == 1


# ---------------------------------------------------------------- resume


def respond(request: RecordedRequest) -> Reply:
    kind = kind_of(request.body)
    return {
        "phase1": Reply(text=ANALYSIS_PLAIN),
        "phase3": Reply(text=PLAN),
        "loop": Reply(text="Here is your visit plan."),
    }[kind]


async def test_resume_mid_planning_never_asks_a_recorded_phase_again(tmp_path: Path) -> None:
    async with FakeLLM(responder=respond) as fake:
        ref = tmp_path / "ref"
        async with open_navi(planning_on(ref, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            reference = await navi.store.read(session)
            reference += await run_to_end(navi, session, "plan my museum visit")
        start = [r.type for r in reference].index("run.started") + 1
        end = [r.type for r in reference].index("plan.ready") + 1
        for cut_at in range(start, end):
            root = tmp_path / f"cut{cut_at}"
            cut = reference[:cut_at]
            url = f"sqlite:///{root}/navi.db"
            root.mkdir()
            async with store_for_url(url) as store:
                await store.append(
                    session, [NewEvent(event=r.event, run_id=r.run_id) for r in cut], expected_seq=0
                )
            asked = len(fake.requests)
            settings = planning_on(root, fake.url, database_url=url, resume_on_start=True)
            async with open_navi(settings, llm=fake) as navi:
                with anyio.fail_after(20):
                    while (records := await navi.store.read(session))[-1].type not in (
                        TERMINAL_RUN_EVENTS
                    ):
                        await anyio.sleep(0.02)
            types = [r.type for r in records]
            assert types[-1] == "run.completed", types
            assert types.count("plan.ready") == 1 and types.count("todo.updated") == 1
            answered = {
                r.event.phase
                for r in cut
                if isinstance(r.event, PlanStatus)
                and any(x.type == "llm.completed" and x.seq > r.seq for x in cut)
            }
            again = kinds(fake)[asked:]
            for phase in answered:
                assert f"phase{phase}" not in again, (cut_at, again)
            assert again[-1] == "loop"
