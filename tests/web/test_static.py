"""The static client as shipped: complete, self-contained and offline (no browser needed)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from navi.web import static_dir

ROOT = Path(__file__).resolve().parents[2]
STATIC = static_dir()
IMPORT = re.compile(r"""^\s*import\s[^'"]*?from\s+['"](\.{1,2}/[^'"]+)['"]""", re.MULTILINE)
ASSET = re.compile(r"""(?:href|src)="([^"#:]+)\"""")
REMOTE = re.compile(r"""(?:src|href)\s*=\s*["']https?://|@import\s+url\(["']?https?://""")


def test_static_dir_holds_the_client() -> None:
    assert (STATIC / "index.html").is_file()
    assert (STATIC / "js" / "main.js").is_file()


def test_every_asset_of_index_html_exists() -> None:
    html = (STATIC / "index.html").read_text()
    assets = ASSET.findall(html)
    assert "js/main.js" in assets
    for asset in assets:
        assert (STATIC / asset).is_file(), f"index.html refers to a missing {asset}"


def test_every_module_import_resolves() -> None:
    modules = sorted((STATIC / "js").glob("*.js"))
    assert len(modules) > 5
    for module in modules:
        for target in IMPORT.findall(module.read_text()):
            resolved = (module.parent / target).resolve()
            assert resolved.is_file(), f"{module.name} imports a missing {target}"


def test_nothing_is_loaded_from_the_network() -> None:
    for path in [STATIC / "index.html", *STATIC.glob("js/*.js"), *STATIC.glob("css/*.css")]:
        assert not REMOTE.search(path.read_text()), f"{path.name} loads something remotely"


def test_the_vendored_libraries_are_pinned() -> None:
    versions = json.loads((STATIC / "vendor" / "VERSIONS.json").read_text())
    lock = json.loads((ROOT / "package-lock.json").read_text())
    for package, version in versions.items():
        assert lock["packages"][f"node_modules/{package}"]["version"] == version
    manifest = json.loads((ROOT / "package.json").read_text())
    assert manifest["dependencies"] == versions, "package.json pins exact versions"


def test_the_vendored_files_match_node_modules() -> None:
    if not (ROOT / "node_modules").is_dir():
        pytest.skip("node_modules/ is absent: run `npm ci` to compare the vendored files")
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "vendor_web.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
