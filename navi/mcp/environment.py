"""The proxy and CA variables a stdio server gets from Navi's environment.

Behind a proxy, or one that intercepts TLS, ``npx`` and ``uvx`` servers need these to
download and to reach their APIs; copying them into every entry is what people forget.
Only these names pass (when Navi has them set); an entry's own ``env`` wins. No other
variable of Navi's reaches a server: its secrets stay its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

PASSED_THROUGH: tuple[str, ...] = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "NODE_USE_SYSTEM_CA",
    "PIP_CERT",
    "UV_NATIVE_TLS",
)


def passed_through(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of :data:`PASSED_THROUGH` that ``environ`` (Navi's) has set."""
    environ = os.environ if environ is None else environ
    return {name: environ[name] for name in PASSED_THROUGH if environ.get(name)}
