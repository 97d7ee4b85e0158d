"""Screenshots of one moment at phone and desktop width, light and dark, for a reviewer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.web.conftest import NaviPage

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 860}


def shoot_all(ui: NaviPage, moment: str, *, before: Any = None) -> list[Path]:
    """``moment``-phone-light.png … -desktop-dark.png; ``before(page)`` runs after each
    switch (e.g. to scroll something into view). The page is left at desktop, light."""
    page = ui.page
    paths = []
    for width_name, size in (("phone", PHONE), ("desktop", DESKTOP)):
        for scheme in ("light", "dark"):
            page.set_viewport_size(size)
            page.emulate_media(color_scheme=scheme)
            page.wait_for_timeout(120)  # a layout pass and the scheme's colours
            if before is not None:
                before(page)
            paths.append(ui.shot(f"{moment}-{width_name}-{scheme}"))
    page.set_viewport_size(DESKTOP)
    page.emulate_media(color_scheme="light")
    return paths
