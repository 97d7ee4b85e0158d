"""``navi serve`` and ``make run`` as a user starts them: the port of the environment or
of ``.env``, one line when the port is taken, and a server that starts without any LLM
and says how to connect one."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.navi.cli.terminal import ROOT, NaviServe, navi_env, run_navi
from tests.support.helpers import free_port, wait_until_serving

NOWHERE = "http://127.0.0.1:1"  # no LLM server there


def test_a_port_in_use_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = navi_env(tmp_path, NOWHERE, port, LOG_LEVEL="INFO")
        done = run_navi(env, "serve", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"navi: port {port} is already in use on 127.0.0.1 (is Navi already running?): "
        "stop that program, or choose another port with --port or NAVI_PORT\n"
    )
    assert not (tmp_path / "data").exists()  # nothing was started, not even the data folder


def test_an_address_that_is_not_this_machines_is_one_line(tmp_path: Path) -> None:
    env = navi_env(tmp_path, NOWHERE, free_port(), NAVI_HOST="192.0.2.1")  # TEST-NET-1
    done = run_navi(env, "serve", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("navi: cannot listen on 192.0.2.1:"), done.stderr
    assert done.stderr.count("\n") == 1


def test_without_any_llm_serve_starts_and_says_how_to_connect_one(tmp_path: Path) -> None:
    # auto: Ollama does not answer, and the embedded model is not there.
    env = navi_env(
        tmp_path,
        NOWHERE,
        free_port(),
        NAVI_LLM_BACKEND="auto",
        NAVI_EMBEDDED_MODEL=str(tmp_path / "no-such-model.gguf"),
        LOG_LEVEL="INFO",
    )
    server = NaviServe(tmp_path, env)
    server.start()
    try:
        health = httpx.get(server.url + "/health", timeout=10).json()
        assert (health["status"], health["backend"]) == ("ok", "none")
        assert "127.0.0.1:1" not in str(health)  # a public route: not where the LLM was sought
        page = httpx.get(server.url + "/", timeout=10).text
        assert 'data-testid="no-llm-notice"' in page and "Open Settings" in page
        status = httpx.get(server.url + "/llm/status", timeout=10).json()
        assert status["reachable"] is False
        assert "No LLM is available" in status["error"]
        assert "open Settings and give an LLM server's URL" in status["error"]
        # A turn fails with the same words, on stderr; nothing on stdout.
        done = run_navi(env, "chat", "hello?")
        assert (done.returncode, done.stdout) == (1, "")
        assert "error: No LLM is available" in done.stderr
        assert "open Settings" in done.stderr
    finally:
        server.stop()
    log = server.log()
    assert "llm.none_usable" in log
    assert "Traceback" not in log and "startup failed" not in log


def test_make_run_listens_on_the_port_of_dotenv(tmp_path: Path) -> None:
    """Through the Makefile's `run` target, in a folder whose `.env` names the port (the
    venv already installed: its install stamp is taken as up to date)."""
    venv = Path(sys.prefix)
    if not (venv / "bin" / "navi").exists():
        pytest.skip(f"the `navi` command is not installed in {venv}")
    port = free_port()
    env = navi_env(tmp_path, NOWHERE, port)
    del env["NAVI_PORT"]
    for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):  # when the suite runs under make
        env.pop(name, None)
    env["PORT"] = "1"  # merely in the environment: not Navi's port
    (tmp_path / ".env").write_text(f"NAVI_PORT={port}\n")
    make = ["make", "-f", str(ROOT / "Makefile"), "-o", f"{venv}/.navi-run", f"VENV={venv}"]
    log = tmp_path / "make-run.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [*make, "run"],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # make and navi serve: one group to stop
        )
    try:
        wait_until_serving(
            f"http://127.0.0.1:{port}/health", process, log=lambda: log.read_text(errors="replace")
        )
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert f"Navi is starting at http://127.0.0.1:{port}" in log.read_text()

    # `make run PORT=…` still chooses the port (and HOST= the address).
    dry = subprocess.run(
        [*make, "-n", "run", "PORT=9001", "HOST=0.0.0.0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert dry.stdout == f"{venv}/bin/navi serve --host 0.0.0.0 --port 9001\n"
