from __future__ import annotations

import sys

import pytest

from tools.settings import DEFAULT_TERMINAL_COMMANDS, ToolSettings


def test_defaults() -> None:
    settings = ToolSettings.from_env({})
    assert settings == ToolSettings()
    assert settings.fs_allowed_paths is None
    assert settings.terminal_allowed_commands == DEFAULT_TERMINAL_COMMANDS
    assert "rm" not in settings.terminal_allowed_commands
    assert settings.searxng_url is None
    assert settings.tools_dir == "user_tools"
    assert settings.code_exec_python == sys.executable


def test_values_from_env() -> None:
    settings = ToolSettings.from_env(
        {
            "FS_ALLOWED_PATHS": "*",
            "TERMINAL_ALLOWED_COMMANDS": "ls, git ,",
            "SSH_HOSTS_FILE": "/etc/navi/hosts.json",
            "SEARXNG_URL": "http://127.0.0.1:8888",
            "TOOLS_DIR": "my_tools",
            "CODE_EXEC_MEMORY_MB": "256",
            "TERMINAL_TIMEOUT_S": "5.5",
        }
    )
    assert settings.fs_allowed_paths == ("*",)
    assert settings.terminal_allowed_commands == ("ls", "git")
    assert settings.ssh_hosts_file == "/etc/navi/hosts.json"
    assert settings.searxng_url == "http://127.0.0.1:8888"
    assert settings.tools_dir == "my_tools"
    assert settings.code_exec_memory_mb == 256
    assert settings.terminal_timeout_s == 5.5


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CODE_EXEC_MEMORY_MB": "lots"}, "CODE_EXEC_MEMORY_MB must be a number, got 'lots'"),
        ({"TOOL_TIMEOUT_S": "-1"}, "TOOL_TIMEOUT_S must be positive, got '-1'"),
    ],
)
def test_bad_values_are_clear_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ToolSettings.from_env(env)


def test_sandbox_settings_from_the_environment() -> None:
    settings = ToolSettings.from_env(
        {
            "CODE_EXEC_ENV": "HTTPS_PROXY, PIP_INDEX_URL",
            "CODE_EXEC_PYTHON": "/usr/bin/python3",
            "TERMINAL_MEMORY_MB": "128",
            "SANDBOX_MAX_PROCESSES": "32",
            "NAVI_UNSANDBOXED_TOOLS": "1",
        }
    )
    assert settings.code_exec_env == ("HTTPS_PROXY", "PIP_INDEX_URL")
    assert settings.code_exec_python == "/usr/bin/python3"
    assert settings.terminal_memory_mb == 128
    assert settings.sandbox_max_processes == 32
    assert settings.unsandboxed_tools
    assert not ToolSettings.from_env({"NAVI_UNSANDBOXED_TOOLS": "0"}).unsandboxed_tools
    assert not ToolSettings.from_env({}).unsandboxed_tools
