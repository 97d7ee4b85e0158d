"""mcp.json in Claude Desktop's format, Navi's own keys, and what a bad entry gives."""

from __future__ import annotations

import json
from pathlib import Path

from navi.config import Settings
from navi.mcp.config import load_config, parse_config, tool_name


def test_claude_desktop_config_with_navis_keys() -> None:
    config = parse_config(
        json.dumps(
            {
                "mcpServers": {
                    "files": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"],
                        "env": {"DEBUG": "1"},
                        "sandbox": True,
                        "profiles": ["coder"],
                    },
                    "search": {
                        "type": "http",
                        "url": "http://127.0.0.1:9000/mcp",
                        "headers": {"Authorization": "Bearer x"},
                        "approval": "auto",
                    },
                    "off": {"command": "x", "disabled": True},
                }
            }
        )
    )
    assert config.errors == ()
    files, search = config.servers["files"], config.servers["search"]
    assert (files.transport, files.command, files.args[-1]) == ("stdio", "npx", "/srv")
    assert files.env == {"DEBUG": "1"} and files.sandbox and files.profiles == ("coder",)
    assert files.allows("coder") and not files.allows("secretary")
    assert (search.transport, search.approval, search.profiles) == ("http", "auto", None)
    assert search.allows("anything")
    assert "off" not in config.servers


def test_a_bad_entry_is_reported_and_the_others_kept() -> None:
    config = parse_config(
        json.dumps(
            {
                "mcpServers": {
                    "good": {"command": "x"},
                    "both": {"command": "x", "url": "http://h/mcp"},
                    "neither": {"args": []},
                    "typed": {"command": 3},
                    "bad approval": {"command": "x"},
                    "ftp": {"url": "ftp://h/mcp"},
                    "ask": {"command": "x", "approval": "never"},
                }
            }
        )
    )
    assert list(config.servers) == ["good"]
    problems = "\n".join(config.errors)
    for name in ("both", "neither", "typed", "bad approval", "ftp", "ask"):
        assert f"server {name!r}" in problems


def test_a_file_that_does_not_parse_starts_nothing(tmp_path: Path) -> None:
    assert load_config(tmp_path / "missing.json").servers == {}
    assert load_config(tmp_path / "missing.json").errors == ()
    broken = tmp_path / "mcp.json"
    broken.write_text("{not json")
    assert "is not valid JSON" in load_config(broken).errors[0]
    broken.write_text("[]")
    assert "mcpServers" in load_config(broken).errors[0]


def test_tool_names_are_safe_for_every_backend() -> None:
    assert tool_name("files", "read_file") == "mcp__files__read_file"
    assert tool_name("my-srv", "get.weather now!") == "mcp__my-srv__get_weather_now_"
    long = tool_name("s", "x" * 100)
    assert len(long) == 64 and long.startswith("mcp__s__xxx")


def test_the_config_lives_in_the_data_folder_unless_named() -> None:
    in_data = Settings.from_env(
        {"NAVI_DATA_DIR": "/data/navi", "NAVI_DATABASE_URL": "sqlite:////srv/other/navi.db"}
    )
    assert in_data.mcp_config_path == Path("/data/navi/mcp.json")
    named = Settings.from_env({"NAVI_MCP_CONFIG": "/etc/navi/mcp.json"})
    assert named.mcp_config_path == Path("/etc/navi/mcp.json")


def test_rw_paths_are_absolute_without_dotdot_and_only_for_a_sandbox() -> None:
    def rw(*paths: object, sandbox: bool = True) -> dict[str, object]:
        return {"command": "x", "sandbox": sandbox, "rw": list(paths)}

    config = parse_config(
        json.dumps(
            {
                "mcpServers": {
                    "good": rw("/srv/out/", "/srv//notes/./x", "/srv/out"),
                    "relative": rw("out"),
                    "home": rw("~/notes"),
                    "dotdot": rw("/srv/out/../../etc"),
                    "root": rw("/"),
                    "nul": rw("/srv/\u0000x"),
                    "typed": rw(3),
                    "open": rw("/srv/out", sandbox=False),
                }
            }
        )
    )
    assert config.servers["good"].rw == ("/srv/out", "/srv/notes/x")
    assert set(config.servers) == {"good"}
    problems = "\n".join(config.errors)
    for name, why in [
        ("relative", "must be absolute"),
        ("home", "must be absolute"),
        ("dotdot", 'must not contain ".."'),
        ("root", "must not be /"),
        ("nul", "NUL"),
        ("typed", "Expected `str`"),
        ("open", '"sandbox": true'),
    ]:
        assert f"server {name!r}: " in problems and why in problems, (name, problems)


def test_variables_are_expanded_from_the_environment() -> None:
    environ = {"TOKEN": "s3cret-token", "HOST": "127.0.0.1", "EMPTY": ""}
    config = parse_config(
        json.dumps(
            {
                "mcpServers": {
                    "web": {
                        "url": "http://${HOST}:${PORT:-9000}/mcp",
                        "headers": {"Authorization": "Bearer ${TOKEN}"},
                    },
                    "local": {
                        "command": "${BIN:-npx}",
                        "args": ["--dir", "${env:HOST}", "${EMPTY:-fallback}", "$HOME"],
                        "env": {"API_KEY": "${TOKEN}", "LEVEL": "${LEVEL:-info}"},
                    },
                    "unset": {"command": "x", "env": {"KEY": "${NOT_SET_ANYWHERE}"}},
                    "prompt": {"command": "x", "args": ["${input:api-key}"]},
                }
            }
        ),
        environ=environ,
    )
    web, local = config.servers["web"], config.servers["local"]
    assert web.url == "http://127.0.0.1:9000/mcp"
    assert web.headers == {"Authorization": "Bearer s3cret-token"}
    assert web.hidden == {"s3cret-token": "${TOKEN}", "127.0.0.1": "${HOST}"}
    assert local.command == "npx"
    assert local.args == ("--dir", "127.0.0.1", "fallback", "$HOME")
    assert local.env == {"API_KEY": "s3cret-token", "LEVEL": "info"}
    assert set(config.servers) == {"web", "local"}
    problems = "\n".join(config.errors)
    assert "server 'unset': \"env\" KEY uses ${NOT_SET_ANYWHERE}, which is not set" in problems
    assert "server 'prompt': \"args\" uses '${input:api-key}'" in problems
    assert "s3cret" not in problems


def test_vs_codes_servers_key_and_types() -> None:
    config = parse_config(
        json.dumps(
            {
                "servers": {
                    "vs": {"type": "stdio", "command": "x"},
                    "legacy": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
                    "stream": {"type": "streamable-http", "url": "http://127.0.0.1:1/mcp"},
                    "twice": {"command": "x"},
                    "wrong": {"type": "sse", "command": "x"},
                    "ws": {"type": "websocket", "url": "http://127.0.0.1:1/"},
                },
                "mcpServers": {
                    "claude": {"url": "http://127.0.0.1:1/mcp"},
                    "twice": {"command": "y"},
                },
            }
        )
    )
    transports = {n: e.transport for n, e in config.servers.items()}
    assert transports == {"vs": "stdio", "legacy": "sse", "stream": "http", "claude": "http"}
    problems = "\n".join(config.errors)
    assert "server 'twice': named in both" in problems
    assert "server 'wrong': \"type\": 'sse' does not go with \"command\"" in problems
    assert "server 'ws': \"type\" 'websocket' is not one of" in problems


def test_tool_filters_and_timeouts() -> None:
    config = parse_config(
        json.dumps(
            {
                "mcpServers": {
                    "a": {"command": "x", "tools": {"allow": ["echo", "add"], "deny": ["add"]}},
                    "b": {"command": "x", "tools": {"deny": ["explode"]}, "timeout": 2.5},
                    "c": {"command": "x", "tools": {"alow": ["echo"]}},
                    "d": {"command": "x", "timeout": 0},
                }
            }
        )
    )
    a, b = config.servers["a"], config.servers["b"]
    assert [t for t in ("echo", "add", "explode") if a.offers(t)] == ["echo"]
    assert [t for t in ("echo", "add", "explode") if b.offers(t)] == ["echo", "add"]
    assert (a.timeout, b.timeout) == (None, 2.5)
    problems = "\n".join(config.errors)
    assert "server 'c': " in problems and "alow" in problems
    assert "server 'd': \"timeout\"" in problems
