"""Print the run state machine as a Mermaid diagram (``--table``: as a Markdown table).

``--update-doc`` rewrites the generated blocks of docs/state-machine.md instead (the
state machine's diagram and table, and the run's decision table).
Run from the repository: ``.venv/bin/python scripts/state_diagram.py``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from navi.run import decide  # noqa: E402
from navi.run.state import mermaid, table_markdown  # noqa: E402

DOC = ROOT / "docs" / "state-machine.md"


def _replacement(body: str) -> Callable[[re.Match[str]], str]:
    return lambda match: match.group(1) + body + match.group(2)


def update_doc(path: Path) -> None:
    text = path.read_text()
    blocks = (
        ("mermaid", f"```mermaid\n{mermaid()}```\n"),
        ("table", table_markdown()),
        ("decisions", decide.table_markdown()),
    )
    for name, body in blocks:
        pattern = re.compile(
            rf"(<!-- BEGIN GENERATED {name} -->\n).*?(<!-- END GENERATED {name} -->)", re.S
        )
        if not pattern.search(text):
            raise SystemExit(f"{path}: no '<!-- BEGIN GENERATED {name} -->' block to update")
        text = pattern.sub(_replacement(body), text)
    path.write_text(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", action="store_true", help="print the Markdown table")
    parser.add_argument("--update-doc", action="store_true", help=f"rewrite {DOC.name}")
    args = parser.parse_args(argv)
    if args.update_doc:
        update_doc(DOC)
    else:
        sys.stdout.write(table_markdown() if args.table else mermaid())


if __name__ == "__main__":
    main()
