"""Settings → Connection in the browser (issue 33, point 2): Verify lists the models or
the exact error, an unusable save is refused and changes nothing, a save moves the
footer and the model picker without a reload, the API key never reaches the page (only
its masked hint); and the tool policies say what each comes to, with a line about each
tool. At desktop and phone width."""

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

from tests.support.fake_llm import FakeLLMServer
from tests.web.conftest import NaviPage
from tests.web.views import DESKTOP, PHONE, shoot_all

KEY = "sk-test-0123456789abcdef"
SIZES = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def _open_settings(ui: NaviPage) -> Any:
    closed = ui.page.evaluate(
        "innerWidth <= 800 && !document.querySelector('#app').classList.contains('sidebar-open')"
    )
    if closed:  # a phone: the sidebar slides in
        ui.page.click("#menu-button")
    ui.page.click("#settings-button")
    dialog = ui.page.get_by_test_id("settings-dialog")
    expect(dialog).to_be_visible()
    return dialog


@pytest.mark.parametrize("size", SIZES)
def test_verify_and_save_an_openai_connection(
    navi_page: NaviPage, navi_server: Any, size: dict[str, int]
) -> None:
    ui = navi_page.open()
    page = ui.page
    page.set_viewport_size(size)
    footer = page.locator("#backend-info .backend-text")
    expect(footer).to_contain_text("ollama · fake-model:latest")
    with FakeLLMServer.in_thread(models=("gpt-fake-1", "gpt-fake-2"), api_key=KEY) as openai:
        dialog = _open_settings(ui)
        key = dialog.locator("input[name=api_key]")
        expect(key).to_be_hidden()  # Ollama takes no key
        dialog.locator("select[name=backend_type]").select_option("openai")
        dialog.locator("input[name=backend_url]").fill(f"{openai.url}/v1")
        result = dialog.get_by_test_id("connection-result")

        # Without the key: the server's 401, word for word.
        dialog.locator("[data-action=verify-connection]").click()
        expect(result).to_contain_text("401")
        expect(result).to_contain_text("Incorrect API key provided")
        key.fill("sk-wrong-key-000000")
        dialog.locator("[data-action=verify-connection]").click()
        expect(result).to_contain_text("401")
        ui.shot(f"verify-401-{size['width']}")

        # Refused on save: nothing changes.
        before = _get(f"{ui.url}/settings")
        dialog.locator("[data-action=save-settings]").click()
        error = dialog.locator(".settings-error")
        expect(error).to_contain_text("not saved: ")
        expect(error).to_contain_text("401")
        assert _get(f"{ui.url}/settings") == before
        expect(footer).to_contain_text("ollama · fake-model:latest")

        key.fill(KEY)
        dialog.locator("[data-action=verify-connection]").click()
        expect(result).to_contain_text("2 models: gpt-fake-1, gpt-fake-2")
        shoot_all(ui, f"connection-verified-{size['width']}")
        page.set_viewport_size(size)
        dialog.locator("[data-action=save-settings]").click()
        expect(dialog).to_be_hidden()

        # No reload: the footer and the model picker follow the new backend.
        expect(footer).to_contain_text("openai · gpt-fake-1")
        picker = page.locator("#model-select")
        expect(picker.locator("option").first).to_have_text("Default · gpt-fake-1")
        expect(picker.locator("option[value='gpt-fake-2']")).to_have_count(1)
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1

        # The key is kept server-side: the page has only its hint.
        dialog = _open_settings(ui)
        key = dialog.locator("input[name=api_key]")
        expect(key).to_be_visible()
        expect(key).to_have_value("")
        expect(key).to_have_attribute("placeholder", "sk-…cdef")
        expect(dialog.locator("select[name=backend_type]")).to_have_value("openai")
        assert KEY not in page.content()
        assert KEY not in page.evaluate(
            "[...document.querySelectorAll('input')].map((i) => i.value).join(' ')"
        )
        dialog.get_by_role("button", name="Cancel").click()


def test_the_status_poll_follows_a_change_made_elsewhere(
    navi_page: NaviPage, navi_server: Any
) -> None:
    ui = navi_page.open()
    page = ui.page
    footer = page.locator("#backend-info .backend-text")
    expect(footer).to_contain_text("ollama · fake-model:latest")
    with FakeLLMServer.in_thread(models=("other-model:7b",)) as other:
        request = urllib.request.Request(
            f"{ui.url}/settings",
            data=json.dumps({"backend_type": "ollama", "backend_url": other.url}).encode(),
            headers={"content-type": "application/json"},
            method="PATCH",
        )
        urllib.request.urlopen(request, timeout=30).close()
        page.evaluate("window.dispatchEvent(new Event('focus'))")  # a status check now
        # The configured model is not on that server: the footer's notice says so,
        # and the picker offers what that server has.
        expect(page.get_by_test_id("model-note")).to_contain_text("other-model:7b")
        expect(page.locator("#model-select option[value='other-model:7b']")).to_have_count(1)


@pytest.mark.parametrize("size", SIZES)
def test_tool_policies_say_what_each_comes_to(
    navi_page: NaviPage, navi_server: Any, size: dict[str, int]
) -> None:
    ui = navi_page.open()
    ui.page.set_viewport_size(size)
    dialog = _open_settings(ui)
    terminal = dialog.locator("select[data-tool=terminal]")
    # The test rig's NAVI_TOOL_APPROVAL=auto is every tool's default.
    expect(terminal.locator("option:checked")).to_have_text("Run without asking (default)")
    terminal.select_option("ask")
    expect(terminal.locator("option:checked")).to_have_text("Ask first (your setting)")
    tools = {t["name"]: t for t in _get(f"{ui.url}/agents/tools")}
    row = dialog.locator(".policy-row", has=ui.page.locator("select[data-tool=terminal]"))
    line = row.locator(".policy-description")
    expect(line).to_be_visible()
    first = line.inner_text()
    assert first and tools["terminal"]["description"].startswith(first)
    assert first.endswith((".", "!", "?")) or first == tools["terminal"]["description"].strip()
    row.scroll_into_view_if_needed()
    ui.shot(f"policies-{size['width']}")
    dialog.locator("[data-action=save-settings]").click()
    expect(dialog).to_be_hidden()
    assert _get(f"{ui.url}/settings")["tool_policy"] == {"terminal": "ask"}
    dialog = _open_settings(ui)
    expect(dialog.locator("select[data-tool=terminal] option:checked")).to_have_text(
        "Ask first (your setting)"
    )
