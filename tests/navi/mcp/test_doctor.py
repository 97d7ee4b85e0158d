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
    silent = [sys.executable, "-c", "import sys, time\nsys.stdin.read()\ntime.sleep(60)"]
    config = write_config(
        tmp_path / "mcp.json",
        {
            "ok": stdio_entry(tmp_path / "log"),
            "missing": {"command": "/no/such/${MCP_DOCTOR_SECRET}"},
            "picky": stdio_entry(tmp_path / "log", tools={"deny": ["explode", "slow"]}),
            "mute": {"command": silent[0], "args": silent[1:], "timeout": 1},
            "unset": {"command": "x", "env": {"K": "${MCP_DOCTOR_UNSET}"}},
        },
    )
    env = {
        "MCP_DOCTOR_SECRET": "doctor-secret-5e1f",
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
    assert f"✗ MCP config {config}: 4 servers" in out, out + done.stderr
    assert "server 'unset': \"env\" K uses ${MCP_DOCTOR_UNSET}, which is not set" in out
    assert re.search(r"✓ MCP server ok \(stdio\): running, \d+ tools\n", out)
    assert re.search(
        r"✓ MCP server picky \(stdio\): running, \d+ tools "
        r'\(left out by its "tools" filter: explode, slow\)',
        out,
    ), out
    assert "✗ MCP server mute (stdio): failed: it did not answer in 1 s" in out
    missing = (
        "✗ MCP server missing (stdio): failed: command not found: /no/such/${MCP_DOCTOR_SECRET}"
    )
    assert missing in out
    assert "doctor-secret-5e1f" not in out + done.stderr
    assert done.returncode == 1  # the missing server (and the LLM) are problems


def test_doctor_gives_the_sign_in_link_of_a_server_that_wants_one(tmp_path: Path) -> None:
    from tests.navi.mcp.oauth_server import oauth_mcp_server

    with oauth_mcp_server() as remote:
        config = write_config(tmp_path / "mcp.json", {"remote": {"url": remote.url}})
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "PYTHONPATH": str(ROOT),
            "NAVI_DATA_DIR": str(tmp_path / "data"),
            "NAVI_PORT": "8765",
            "NAVI_MCP_CONFIG": str(config),
            "NAVI_LLM_BACKEND": "ollama",
            "OLLAMA_HOST": "http://127.0.0.1:9",
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
    assert (
        "✗ MCP server remote (http): needs sign-in: it wants a sign-in (OAuth); "
        "sign in at http://127.0.0.1:8765/mcp/remote/sign-in\n"
    ) in out, out + done.stderr
    assert "the link works while navi serve runs at http://127.0.0.1:8765" in out
    # The probe's own registration is not kept: navi serve's sign-in stays the one.
    assert not (tmp_path / "data" / "secrets" / "mcp_oauth" / "remote.json").exists()
    assert "authorize?" not in out + done.stderr
