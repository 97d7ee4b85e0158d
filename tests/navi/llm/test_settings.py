from __future__ import annotations

import pytest

from navi.llm.settings import LLMSettings, LLMSettingsError, normalize_ollama_host


def test_defaults_match_the_original_navi() -> None:
    settings = LLMSettings.from_env({})
    assert settings.backend == "auto"
    assert settings.ollama_host == "http://localhost:11434"
    assert settings.default_model == "gemma4:e2b-it-q8_0"
    assert settings.num_ctx == 65536
    assert settings.think is True
    assert settings.first_chunk_timeout == 120 and settings.chunk_timeout == 60
    assert settings.max_connections == 512 and settings.pool_timeout == 60


def test_everything_from_the_environment() -> None:
    settings = LLMSettings.from_env(
        {
            "NAVI_LLM_BACKEND": "OpenAI",
            "OLLAMA_HOST": "gpu-box:11500",
            "OLLAMA_DEFAULT_MODEL": "qwen3:8b",
            "OLLAMA_NUM_CTX": "8192",
            "OLLAMA_THINK": "medium",
            "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1/",
            "OPENAI_API_KEY": "sk-x",
            "OPENAI_MODEL": "Qwen/Qwen3-8B",
            "NAVI_EMBEDDED_MODEL": "/models/x.gguf",
            "NAVI_EMBEDDED_N_CTX": "2048",
            "NAVI_EMBEDDED_THREADS": "2",
            "LLM_STREAM_FIRST_CHUNK_TIMEOUT": "300",
            "LLM_STREAM_CHUNK_TIMEOUT": "30.5",
            "LLM_CONNECT_TIMEOUT": "3",
            "NAVI_LLM_MAX_CONNECTIONS": "64",
            "NAVI_LLM_POOL_TIMEOUT": "5",
        }
    )
    assert settings == LLMSettings(
        backend="openai",
        ollama_host="http://gpu-box:11500",
        default_model="qwen3:8b",
        model_pinned=True,  # set in the environment: the operator's choice
        num_ctx=8192,
        think="medium",
        openai_base_url="http://127.0.0.1:8000/v1",
        openai_api_key="sk-x",
        openai_model="Qwen/Qwen3-8B",
        embedded_model_path="/models/x.gguf",
        embedded_n_ctx=2048,
        embedded_threads=2,
        first_chunk_timeout=300,
        chunk_timeout=30.5,
        connect_timeout=3,
        max_connections=64,
        pool_timeout=5,
    )


@pytest.mark.parametrize(
    ("raw", "value"), [("false", False), ("0", False), ("Yes", True), ("high", "high")]
)
def test_think_values(raw: str, value: bool | str) -> None:
    assert LLMSettings.from_env({"OLLAMA_THINK": raw}).think == value


@pytest.mark.parametrize(
    ("raw", "url"),
    [
        ("localhost", "http://localhost:11434"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("0.0.0.0:9999", "http://127.0.0.1:9999"),
        ("http://example.test:80/", "http://example.test:80"),
        ("https://ollama.example.test", "https://ollama.example.test:443"),
        ("[::1]:11434", "http://[::1]:11434"),
    ],
)
def test_ollama_host_forms(raw: str, url: str) -> None:
    assert normalize_ollama_host(raw) == url


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("NAVI_LLM_BACKEND", "llamafile"),
        ("OLLAMA_NUM_CTX", "lots"),
        ("OLLAMA_NUM_CTX", "-1"),
        ("OLLAMA_THINK", "maybe"),
        ("OLLAMA_HOST", "ftp://x"),
        ("OLLAMA_HOST", "host:notaport"),
        ("OPENAI_BASE_URL", "localhost:8080"),
        ("LLM_STREAM_CHUNK_TIMEOUT", "0"),
        ("LLM_STREAM_FIRST_CHUNK_TIMEOUT", "soon"),
        ("NAVI_EMBEDDED_THREADS", "-2"),
        ("NAVI_LLM_MAX_CONNECTIONS", "0"),
        ("NAVI_LLM_MAX_CONNECTIONS", "unbounded"),
        ("NAVI_LLM_POOL_TIMEOUT", "-1"),
    ],
)
def test_a_bad_value_names_the_variable(name: str, raw: str) -> None:
    with pytest.raises(LLMSettingsError) as caught:
        LLMSettings.from_env({name: raw})
    assert name in str(caught.value) and repr(raw) in str(caught.value)


def test_empty_values_mean_default() -> None:
    assert LLMSettings.from_env({"OLLAMA_NUM_CTX": "", "OLLAMA_THINK": "  "}) == LLMSettings()
