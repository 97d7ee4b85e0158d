"""The first message works with the models the user has (issue 33, point 1), as the page
shows it: a real server whose fake Ollama has llama3.2:3b and qwen3:8b only (404 for any
other model). The footer says which model Navi uses and why; on the embedded demo model
the welcome screen says so and offers the user's Ollama models, and a click makes one
the chat's model. At 1280x800 and 390x844."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from navi.llm.settings import LLMSettings
from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.navi_server import RunningServer, run_server
from tests.web.conftest import TIMEOUT_MS, NaviPage

MODELS = ("llama3.2:3b", "qwen3:8b")
REASON = "llama3.1 is not installed; using llama3.2:3b, an installed model that supports tools"
SIZES = {"desktop": (1280, 800), "phone": (390, 844)}
DEMO_HEALTH = json.dumps(
    {
        "status": "ok",
        "backend": "embedded",
        "model": "SmolLM2-135M-Instruct-Q8_0.gguf",
        "demo_model": True,
        "context_window": 8192,
        "model_reason": "",
        "model_missing": False,
    }
)


@pytest.fixture
def navi_server(tmp_path: Path) -> Iterator[RunningServer]:
    caps = {m: ["completion", "tools"] for m in MODELS}
    with FakeLLMServer.in_thread(
        models=MODELS, capabilities=caps, only_listed=True, default=Reply(text="Hello there.")
    ) as fake:
        llm = LLMSettings(
            ollama_host=fake.url,
            default_model="llama3.1",  # the built-in default: not pinned, not installed
            num_ctx=8192,
            first_chunk_timeout=10.0,
            chunk_timeout=10.0,
        )
        with run_server(tmp_path, fake, llm=llm) as running:
            yield running


@pytest.fixture(params=list(SIZES))
def ui(
    browser: Any, navi_server: RunningServer, request: pytest.FixtureRequest
) -> Iterator[NaviPage]:
    width, height = SIZES[request.param]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield NaviPage(page, navi_server.url, request.node.name.replace("[", "-").rstrip("]"))
        assert not errors, f"JavaScript errors on the page: {errors}"
    finally:
        context.close()


def in_viewport(page: Any, locator: Any) -> None:
    """Wholly on screen (waits for the drawer's slide to end)."""
    expect(locator).to_be_in_viewport(ratio=1)
    box = locator.bounding_box()
    size = page.viewport_size
    assert box is not None and size is not None
    assert box["x"] >= 0 and box["x"] + box["width"] <= size["width"] + 1, box


def test_the_footer_says_which_model_and_why(ui: NaviPage, navi_server: RunningServer) -> None:
    ui.open()
    if ui.page.viewport_size["width"] < 800:
        ui.page.click("#menu-button")  # the sidebar, with its footer, is a drawer here
    footer = ui.page.locator("#backend-info")
    expect(footer.locator(".backend-text")).to_have_text("ollama · llama3.2:3b")
    note = ui.page.get_by_test_id("model-note")
    expect(note).to_be_visible()
    expect(note).to_have_text(REASON)
    in_viewport(ui.page, note)
    expect(ui.page.get_by_test_id("demo-notice")).to_have_count(0)  # not the demo model
    ui.shot()
    # And the first message works: it goes to the model Navi picked.
    if ui.page.viewport_size["width"] < 800:
        ui.page.keyboard.press("Escape")
    ui.send("Hi")
    expect(ui.page.locator(".message.assistant .text-block")).to_contain_text("Hello there.")
    assert navi_server.fake_llm.requests[-1]["model"] == "llama3.2:3b"


def test_the_welcome_screen_offers_the_users_models_on_the_demo_model(
    ui: NaviPage, navi_server: RunningServer
) -> None:
    # Navi started on the embedded demo model; Ollama answers now (GET /llm/models,
    # real: it lists the fake Ollama's models).
    ui.page.route(
        "**/health",
        lambda route: route.fulfill(status=200, content_type="application/json", body=DEMO_HEALTH),
    )
    ui.open()
    notice = ui.page.locator(".empty-state").get_by_test_id("demo-notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("Demo model: small and slow — connect Ollama for real work")
    expect(notice).to_contain_text("Ollama answers now. Use one of your models for this chat:")
    offered = notice.locator("button.demo-model")
    expect(offered).to_have_text(list(MODELS))
    in_viewport(ui.page, notice)
    ui.shot("offer")
    notice.locator('button[data-model="qwen3:8b"]').click()
    expect(ui.page.locator("#model-select")).to_have_value("qwen3:8b")
    session = ui.session_id
    assert session
    ui.send("Which model?")
    expect(ui.page.locator(".message.assistant .text-block")).to_contain_text("Hello there.")
    assert navi_server.fake_llm.requests[-1]["model"] == "qwen3:8b"


def test_without_ollama_the_demo_notice_says_how_to_connect_it(ui: NaviPage) -> None:
    ui.page.route(
        "**/health",
        lambda route: route.fulfill(status=200, content_type="application/json", body=DEMO_HEALTH),
    )
    models = json.dumps(
        {
            "backend": "embedded",
            "default_model": "SmolLM2-135M-Instruct-Q8_0.gguf",
            "models": [{"name": "SmolLM2-135M-Instruct-Q8_0.gguf", "size_bytes": 1}],
        }
    )
    ui.page.route(
        "**/llm/models*",
        lambda route: route.fulfill(status=200, content_type="application/json", body=models),
    )
    ui.open()
    notice = ui.page.locator(".empty-state").get_by_test_id("demo-notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("Start Ollama and set OLLAMA_HOST")
    expect(notice.locator("button")).to_have_count(0)
    in_viewport(ui.page, notice)
    ui.shot("no-ollama")
