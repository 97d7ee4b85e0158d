#!/usr/bin/env bash
# A plain install must never half-work: install Navi with the pip that `python3 -m venv`
# brings (not an upgraded one, as `make run` uses), then check that every built-in tool
# imports and that `navi doctor` runs through. pip before 24 skipped lxml's html-clean
# extra without a word, and Navi then died at start-up (see pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m venv "$work/venv"
echo "stock install check with $("$work/venv/bin/pip" --version)"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check -e '.[mcp]' 2>&1 \
    | grep -v "^WARNING: Location" || true
"$work/venv/bin/pip" check
"$work/venv/bin/python" - <<'PY'
from tools import create_registry
registry = create_registry()
assert not registry.unavailable, f"built-in tools unavailable: {registry.unavailable}"
print(f"all {len(registry.builtin_names)} built-in tools import")
PY
# Exit status 1 is fine here (no LLM on a CI machine); a crash is not.
out="$(cd "$work" && NAVI_DATA_DIR="$work/data" OLLAMA_HOST=http://127.0.0.1:1 \
    "$work/venv/bin/navi" doctor 2>&1)" || true
if grep -qE "Traceback|unavailable" <<<"$out" || ! grep -qE "All good|problem" <<<"$out"; then
    echo "$out"
    echo "navi doctor failed after a stock install" >&2
    exit 1
fi
echo "navi doctor runs after a stock install"
