"""Navi's web client: static HTML, CSS and ES modules, served by ``navi.server``.

No build step: the browser loads ``static/js/main.js`` as an ES module. Third-party
libraries (marked, DOMPurify, highlight.js) are vendored in ``static/vendor/`` from the
npm packages pinned in ``package-lock.json`` (refresh with ``scripts/vendor_web.py``), so
the UI works offline and nothing is fetched from a CDN.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["static_dir"]

_STATIC = Path(__file__).resolve().parent / "static"


def static_dir() -> Path:
    """The folder to serve at ``/``: ``index.html``, ``css/``, ``js/``, ``vendor/``."""
    return _STATIC
