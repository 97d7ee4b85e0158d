"""Browser tests of the web client: Debian's Chromium driven by Playwright, against the
real server (the ``navi_server`` fixture of ``tests/support/navi_server.py``) and the fake
LLM server.

They skip, with the reason, when ``/usr/bin/chromium`` (``apt-get install -y chromium``)
or the Python ``playwright`` package is missing. Playwright's own browser download
(``playwright install``) is never used. Each test leaves a screenshot in
``test-output/web/<test name>.png`` (and ones it takes itself) for a reviewer.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_llm import Reply

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
OUTPUT = ROOT / "test-output" / "web"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 15_000


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return f"browser tests need Chromium at {CHROMIUM} (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "browser tests need the Python package playwright (pip install playwright)"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that drive Chromium carry the ``browser`` marker (``-m "not browser"``)."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


# One per test file, not per session: Playwright's sync API keeps its event loop marked
# running in the main thread while it is open, so no async test can run beside it (under
# pytest-xdist a worker runs other files after a web one).
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # launch() runs Chromium with a fresh temporary profile (user-data dir) that it
        # deletes on close; every context below is isolated from the others as well.
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class LLMScript:
    """What the fake LLM answers, for one test.

    Tool-loop calls (requests that offer tools) get ``replies`` in order. Side calls
    (no tools: planning, compression, memory) never take them: a planning call gets
    ``plan`` (or "DIRECT": no plan), any other side call an empty list. So a test does
    not depend on which side calls a profile makes.
    """

    def __init__(self, fake: Any) -> None:
        self.fake = fake
        self.loop: deque[Reply] = deque()
        self.plan: str | None = None
        self.last: Reply | None = None

    def __call__(self, *replies: Reply, plan: str | None = None, repeat_last: bool = False) -> None:
        self.loop.extend(replies)
        self.plan = plan
        self.last = replies[-1] if repeat_last and replies else None
        if hasattr(self.fake, "responder"):
            self.fake.responder = self.respond
        else:  # a fake in another process: plain order
            self.fake.script(*replies)

    def respond(self, request: Any) -> Reply:
        body = request.body if isinstance(request.body, dict) else {}
        if body.get("tools"):
            if self.loop:
                return self.loop.popleft()
            return self.last or Reply(text="(the test's script is used up)")
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        if "DIRECT" in prompt:
            return Reply(text=self.plan or "DIRECT")
        return Reply(text="[]")

    @property
    def loop_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.fake.requests if r.get("tools")]


class NaviPage:
    """A page of the web client, with the few moves the tests repeat."""

    def __init__(self, page: Any, url: str, name: str) -> None:
        self.page = page
        self.url = url.rstrip("/")
        self.name = name

    def open(self, session_id: str = "") -> NaviPage:
        self.page.goto(f"{self.url}/" + (f"#{session_id}" if session_id else ""))
        self.page.wait_for_selector("#profile-select option", state="attached")
        return self

    def send(self, text: str) -> None:
        """Type and press Enter; returns once the message is on the page (sent)."""
        from playwright.sync_api import expect

        sent = self.page.locator(".message.user")
        before = sent.count()
        self.page.fill("#prompt", text)
        self.page.keyboard.press("Enter")
        expect(sent).to_have_count(before + 1)

    def wait_idle(self) -> None:
        """Until no run is active (the Send button is back; a sent message locks it)."""
        self.page.wait_for_selector("#send-button:not([hidden])")
        self.page.wait_for_selector("#stop-button", state="hidden")

    @property
    def session_id(self) -> str:
        match = re.search(r"#(.+)$", self.page.url)
        return match.group(1) if match else ""

    def shot(self, suffix: str = "") -> Path:
        OUTPUT.mkdir(parents=True, exist_ok=True)
        path = OUTPUT / f"{self.name}{'-' + suffix if suffix else ''}.png"
        self.page.screenshot(path=str(path))
        return path


@pytest.fixture
def llm(navi_server: Any) -> LLMScript:
    return LLMScript(navi_server.fake_llm)


@pytest.fixture
def navi_page(browser: Any, navi_server: Any, request: pytest.FixtureRequest) -> Iterator[NaviPage]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    ui = NaviPage(page, navi_server.url, request.node.name)
    try:
        yield ui
        assert not errors, f"JavaScript errors on the page: {errors}"
    finally:
        from playwright.sync_api import Error as PlaywrightError

        with suppress(PlaywrightError):  # best effort: a crashed page has no picture
            ui.shot()  # the page as the test left it, pass or fail
        context.close()
