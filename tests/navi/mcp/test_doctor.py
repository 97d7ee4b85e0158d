"""``navi doctor`` lists each MCP server: started or not, why, how many tools."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.navi.mcp.support import stdio_entry, write_config

pytest.importorskip("mcp")
ROOT = Path(__file__).resolve().parents[3]


def test_doctor_reports_each_mcp_server(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "mcp.json",
        {"ok": stdio_entry(tmp_path / "log"), "missing": {"command": "/no/such/mcp"}},
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "NAVI_DATABASE_URL": f"sqlite:///{tmp_path / 'navi.db'}",
        "NAVI_MCP_CONFIG": str(config),
        "NAVI_LLM_BACKEND": "ollama",
        "OLLAMA_HOST": "http://127.0.0.1:9",
        "TOOLS_DIR": str(tmp_path / "tools"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "navi.cli", "doctor"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout
    assert f"✓ MCP config {config}: 2 servers" in out, out + done.stderr
    assert re.search(r"✓ MCP server ok \(stdio\): running, \d+ tools", out)
    assert "✗ MCP server missing (stdio): failed: command not found: /no/such/mcp" in out
    assert done.returncode == 1  # the missing server (and the LLM) are problems
