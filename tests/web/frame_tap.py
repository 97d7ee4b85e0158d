"""The page's traffic with the real server, through the test (Playwright's routes).

:class:`FrameTap` sits on the page's WebSocket to ``/ws/sessions/…``: every frame the
real server sends is recorded on its way; ``approval_required`` frames can be *held*
(so a test decides the moment a card appears: after it has typed, blurred, reloaded)
and *changed* (the approval consent fields added, or taken away as an older server
would send them). :class:`DecisionTap` records the bodies of the decisions the page
POSTs to ``/sessions/{id}/approvals/{call_id}``, and can take out ``stream_id`` for a
server that does not know that field yet. Nothing is faked: the server, its frames and
its decisions are real; the taps only delay, record and (where a test says so) edit.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

Frame = dict[str, Any]

# The fields issue 30 adds to approval_required (the consent branch).
CONSENT_FIELDS = ("stream_id", "summary", "target", "risk", "asked_by", "session_scope")
WAIT_SECONDS = 15.0


def wait_until(page: Any, condition: Callable[[], bool], what: str) -> None:
    """Until ``condition()`` holds. Playwright delivers a sync test's route callbacks only
    while the test is inside a Playwright call: each short wait lets them run."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        page.wait_for_timeout(20)


class FrameTap:
    def __init__(self, page: Any, *, change: Callable[[Frame], Frame] | None = None) -> None:
        self.page = page
        self.change = change
        self.frames: list[Frame] = []  # as the page got them (after ``change``)
        self.holding = False
        self._held: list[tuple[Any, str]] = []
        page.route_web_socket(re.compile(r"/ws/sessions/"), self._route)

    @property
    def requests(self) -> list[Frame]:
        """The approval_required frames the page got."""
        return [f for f in self.frames if f.get("type") == "approval_required"]

    def hold(self) -> None:
        """From now on, approval_required frames wait here until :meth:`release`."""
        self.holding = True

    def wait_held(self, count: int = 1) -> None:
        wait_until(self.page, lambda: len(self._held) >= count, f"{count} held frame(s)")

    def release(self, count: int | None = None) -> None:
        """Hand the held frames (the first ``count``, or all) to the page; later ones
        still wait while others are held, else pass at once."""
        count = len(self._held) if count is None else count
        released, self._held = self._held[:count], self._held[count:]
        self.holding = bool(self._held)
        for route, message in released:
            self.frames.append(json.loads(message))
            route.send(message)

    def _route(self, route: Any) -> None:
        server = route.connect_to_server()

        def from_server(message: str | bytes) -> None:
            if isinstance(message, bytes):
                route.send(message)
                return
            frame = json.loads(message)
            if isinstance(frame, dict) and frame.get("type") == "approval_required":
                if self.change is not None:
                    frame = self.change(frame)
                    message = json.dumps(frame)
                if self.holding:
                    self._held.append((route, message))
                    return
            self.frames.append(frame)
            route.send(message)

        server.on_message(from_server)


class DecisionTap:
    """The decisions the page sends (their JSON bodies), passed on to the real server;
    ``strip_stream_id``: without that field (a server from before it refuses it)."""

    def __init__(self, page: Any, *, strip_stream_id: bool = False) -> None:
        self.bodies: list[Frame] = []
        self.strip_stream_id = strip_stream_id
        page.route(re.compile(r"/sessions/[^/?#]+/approvals/[^/?#]+$"), self._route)

    def _route(self, route: Any) -> None:
        request = route.request
        if request.method != "POST":
            route.continue_()
            return
        body = json.loads(request.post_data or "{}")
        self.bodies.append(dict(body))
        if self.strip_stream_id:
            body.pop("stream_id", None)
        route.continue_(post_data=json.dumps(body))


def without_consent_fields(frame: Frame) -> Frame:
    """The frame as a server from before issue 30 sends it."""
    return {k: v for k, v in frame.items() if k not in CONSENT_FIELDS}
