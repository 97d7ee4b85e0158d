"""The web client under its own Content-Security-Policy, in a real browser: it runs
with no violation, and a model's answer that shows images of another site does not
make the browser fetch them (they become links); its own and data: images show."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need the Python package playwright (pip install playwright)",
)

from playwright.sync_api import expect

from tests.support.fake_llm import Reply
from tests.support.local_servers import LocalHTTPServer, tiny_png
from tests.web.conftest import LLMScript, NaviPage


def violations(page: Any) -> list[str]:
    found: list[str] = []
    page.on(
        "console",
        lambda message: (
            found.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    return found


def test_the_client_works_under_its_policy(navi_page: NaviPage, llm: LLMScript) -> None:
    refused = violations(navi_page.page)
    llm(Reply(text="Hello **there**!\n\n```python\nprint('hi')\n```"))
    ui = navi_page.open()
    policy = ui.page.evaluate("fetch('/').then((r) => r.headers.get('content-security-policy'))")
    assert "script-src 'self'" in policy
    ui.send("Hi")
    ui.wait_idle()
    expect(ui.page.locator(".message.assistant .code-block")).to_be_visible()
    ui.page.reload()
    ui.page.wait_for_selector("#profile-select option", state="attached")
    expect(ui.page.locator(".message.assistant strong")).to_have_text("there")
    assert refused == [], refused


def test_images_of_another_site_are_links_and_never_fetched(
    navi_page: NaviPage, llm: LLMScript
) -> None:
    import base64

    refused = violations(navi_page.page)
    dot = "data:image/png;base64," + base64.b64encode(tiny_png()).decode()
    with LocalHTTPServer() as other:
        pixel = other.url("/pixel.png")
        raw = other.url("/raw.png")
        llm(
            Reply(
                text=f"A chart: ![the chart]({pixel})\n\n"
                f'Raw: <img src="{raw}" alt="raw one">\n\n'
                f"Inline: ![a dot]({dot})"
            )
        )
        ui = navi_page.open()
        ui.send("Show me images")
        ui.wait_idle()
        answer = ui.page.locator(".message.assistant .text-block").last
        link = answer.locator("a.remote-image", has_text="the chart")
        expect(link).to_have_attribute("href", pixel)
        expect(link).to_have_attribute("target", "_blank")
        expect(answer.locator("a.remote-image", has_text="raw one")).to_have_attribute("href", raw)
        expect(answer.locator("img")).to_have_count(1)
        assert answer.locator("img").get_attribute("src") == dot
        assert answer.locator("img").evaluate("(img) => img.complete && img.naturalWidth") == 2
        ui.shot("remote-images")
        # Reloading renders the history: still nothing fetched from the other site.
        ui.page.reload()
        expect(ui.page.locator("a.remote-image")).to_have_count(2)
        assert [r.path for r in other.requests] == []
    assert refused == [], refused
