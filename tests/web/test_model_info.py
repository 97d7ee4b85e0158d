"""Knowing what is happening (issue 23): the sidebar footer names the backend and the
whole model, warns when the model is the embedded demo one, and a silent prefill shows
"Waiting for the model… N s" until the first token."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.support.fake_llm import Reply
from tests.web.conftest import LLMScript, NaviPage


def _health(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=10) as answer:
        return json.loads(answer.read())


def test_the_footer_names_the_whole_model(navi_page: NaviPage, navi_server: Any) -> None:
    health = _health(navi_server.url)
    assert health["demo_model"] is False
    ui = navi_page.open()
    footer = ui.page.locator("#backend-info")
    expect(footer.locator(".backend-text")).to_have_text(f"{health['backend']} · {health['model']}")
    expect(footer.locator(".backend-text")).to_have_attribute(
        "title", f"{health['backend']} · {health['model']}"
    )
    expect(ui.page.get_by_test_id("demo-notice")).to_be_hidden()
    expect(ui.page.get_by_test_id("no-llm-notice")).to_be_hidden()


def test_the_demo_model_notice(navi_page: NaviPage, navi_server: Any) -> None:
    long_name = "SmolLM2-135M-Instruct-Q8_0-a-rather-long-model-name.gguf"
    body = json.dumps(
        {
            "status": "ok",
            "backend": "embedded",
            "model": long_name,
            "demo_model": True,
            "context_window": 8192,
        }
    )
    ui = navi_page
    ui.page.route(
        "**/health",
        lambda route: route.fulfill(status=200, content_type="application/json", body=body),
    )
    ui.open()
    text = ui.page.locator("#backend-info .backend-text")
    expect(text).to_have_text(f"embedded · {long_name}")
    # The notice is on the welcome screen (tests/web/test_model_choice.py: with models).
    notice = ui.page.locator(".empty-state").get_by_test_id("demo-notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("Demo model: small and slow — connect Ollama for real work")
    # Not truncated: the whole name is on screen (it wraps), inside the sidebar.
    box = text.bounding_box()
    sidebar = ui.page.locator(".sidebar").bounding_box()
    assert box is not None and sidebar is not None
    assert box["x"] + box["width"] <= sidebar["x"] + sidebar["width"] + 1
    assert text.evaluate("el => el.scrollWidth <= el.clientWidth + 1")
    ui.shot("demo")


def test_no_llm_says_how_to_connect_one(navi_page: NaviPage, navi_server: Any) -> None:
    # GET /health of a Navi started without any usable LLM (navi/llm/missing.py).
    body = json.dumps(
        {
            "status": "ok",
            "backend": "none",
            "model": "",
            "demo_model": False,
            "context_window": 8192,
        }
    )
    ui = navi_page
    ui.page.route(
        "**/health",
        lambda route: route.fulfill(status=200, content_type="application/json", body=body),
    )
    ui.open()
    expect(ui.page.locator("#backend-info .backend-text")).to_have_text("no LLM")
    notice = ui.page.get_by_test_id("no-llm-notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("No LLM is connected")
    expect(notice).to_contain_text("Open Settings")
    expect(notice).to_contain_text("OLLAMA_HOST")
    expect(ui.page.get_by_test_id("demo-notice")).to_be_hidden()
    ui.shot("no-llm")


def test_waiting_for_the_first_token(navi_page: NaviPage, llm: LLMScript) -> None:
    llm(Reply(text="Here at last.", delay_first=3.5))
    ui = navi_page.open()
    ui.send("Hello?")
    waiting = ui.page.get_by_test_id("waiting")
    expect(waiting).to_be_visible()
    expect(waiting).to_contain_text("Waiting for the model…")
    expect(waiting).to_contain_text("2 s")
    ui.shot("waiting")
    expect(ui.page.locator(".message.assistant .text-block")).to_contain_text("Here at last.")
    expect(waiting).to_have_count(0)
    ui.wait_idle()
