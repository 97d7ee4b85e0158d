"""Copy the web client's third-party libraries from node_modules/ into the static folder.

The copies in ``navi/web/static/vendor/`` are committed, so ``pip install`` alone serves
a working, offline UI; this script only refreshes them after a version bump::

    npm ci                       # exact versions from package-lock.json
    python3 scripts/vendor_web.py  # or: npm run vendor

``--check`` compares instead of copying and exits 1 when the vendored files differ from
what node_modules/ would give (CI can run it after ``npm ci``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NODE_MODULES = ROOT / "node_modules"
VENDOR = ROOT / "navi" / "web" / "static" / "vendor"
# A source map comment would make the browser ask for a file we do not ship.
_SOURCE_MAP = re.compile(r"\n?//# sourceMappingURL=\S+\s*$")


@dataclass(frozen=True)
class VendoredFile:
    package: str
    source: str  # path inside the package
    target: str  # path inside vendor/


FILES = (
    VendoredFile("marked", "lib/marked.esm.js", "marked.esm.js"),
    VendoredFile("marked", "LICENSE", "LICENSE.marked.txt"),
    # .js rather than .mjs: every static server knows the MIME type of .js.
    VendoredFile("dompurify", "dist/purify.es.mjs", "purify.es.js"),
    VendoredFile("dompurify", "LICENSE", "LICENSE.dompurify.txt"),
    # The "common languages" build of highlight.js, as one ES module.
    VendoredFile("@highlightjs/cdn-assets", "es/highlight.min.js", "highlight.min.js"),
    VendoredFile("@highlightjs/cdn-assets", "styles/github.min.css", "hljs-github.min.css"),
    VendoredFile(
        "@highlightjs/cdn-assets", "styles/github-dark.min.css", "hljs-github-dark.min.css"
    ),
    VendoredFile("@highlightjs/cdn-assets", "LICENSE", "LICENSE.highlightjs.txt"),
    # KaTeX (LaTeX in answers), loaded by the page only when an answer holds math: the
    # script, its stylesheet and the fonts it names (woff2 only: every browser the client
    # supports reads it first, so the .woff/.ttf fallbacks in the CSS are never asked for).
    VendoredFile("katex", "dist/katex.min.js", "katex/katex.min.js"),
    VendoredFile("katex", "dist/katex.min.css", "katex/katex.min.css"),
    VendoredFile("katex", "LICENSE", "LICENSE.katex.txt"),
    *(
        VendoredFile("katex", f"dist/fonts/KaTeX_{font}.woff2", f"katex/fonts/KaTeX_{font}.woff2")
        for font in (
            "AMS-Regular",
            "Caligraphic-Bold",
            "Caligraphic-Regular",
            "Fraktur-Bold",
            "Fraktur-Regular",
            "Main-Bold",
            "Main-BoldItalic",
            "Main-Italic",
            "Main-Regular",
            "Math-BoldItalic",
            "Math-Italic",
            "SansSerif-Bold",
            "SansSerif-Italic",
            "SansSerif-Regular",
            "Script-Regular",
            "Size1-Regular",
            "Size2-Regular",
            "Size3-Regular",
            "Size4-Regular",
            "Typewriter-Regular",
        )
    ),
)


def _content(file: VendoredFile, node_modules: Path) -> bytes:
    path = node_modules / file.package / file.source
    if not path.is_file():
        raise SystemExit(f"missing {path}: run `npm ci` in {ROOT} first")
    data = path.read_bytes()
    if path.suffix in (".js", ".mjs"):
        data = _SOURCE_MAP.sub("\n", data.decode()).encode()
    return data


def _versions(node_modules: Path) -> dict[str, str]:
    versions = {}
    for package in sorted({file.package for file in FILES}):
        manifest = json.loads((node_modules / package / "package.json").read_text())
        versions[package] = manifest["version"]
    return versions


def _wanted(node_modules: Path) -> dict[str, bytes]:
    wanted = {file.target: _content(file, node_modules) for file in FILES}
    wanted["VERSIONS.json"] = (json.dumps(_versions(node_modules), indent=2) + "\n").encode()
    return wanted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not copy")
    parser.add_argument(
        "--node-modules",
        type=Path,
        default=NODE_MODULES,
        help="where `npm ci` put the packages (default: node_modules/ of the repository)",
    )
    args = parser.parse_args(argv)
    wanted = _wanted(args.node_modules)
    if args.check:
        stale = [
            name
            for name, data in wanted.items()
            if not (VENDOR / name).is_file() or (VENDOR / name).read_bytes() != data
        ]
        for name in stale:
            sys.stderr.write(f"stale: {VENDOR / name}\n")
        return 1 if stale else 0
    VENDOR.mkdir(parents=True, exist_ok=True)
    for name, data in wanted.items():
        (VENDOR / name).parent.mkdir(parents=True, exist_ok=True)
        (VENDOR / name).write_bytes(data)
    sys.stdout.write(f"vendored {len(wanted)} files into {VENDOR.relative_to(ROOT)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
