"""Tool settings: allowlists, folders and limits, read once from the environment."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import msgspec

# Commands the terminal runs when TERMINAL_ALLOWED_COMMANDS is unset: read-only inspection.
# ``*`` allows every executable; it is an explicit choice, never the default.
DEFAULT_TERMINAL_COMMANDS: tuple[str, ...] = (
    "cat", "date", "df", "diff", "du", "echo", "file", "free", "grep", "head", "hostname",
    "ls", "pwd", "ps", "sort", "stat", "tail", "uname", "uniq", "uptime", "wc", "whoami",
)  # fmt: skip


class ToolSettings(msgspec.Struct, frozen=True, kw_only=True):
    # None: only the session's files directory. ("*",): anywhere. Else these roots
    # (the session's files directory is always allowed as well: uploads live there).
    fs_allowed_paths: tuple[str, ...] | None = None
    # ("*",) allows every executable on PATH.
    terminal_allowed_commands: tuple[str, ...] = DEFAULT_TERMINAL_COMMANDS
    ssh_hosts_file: str = "ssh_hosts.json"
    searxng_url: str | None = None
    tools_dir: str = "user_tools"
    manuals_dir: str = "manuals"

    output_max_chars: int = 20_000
    default_timeout_s: float = 60.0
    terminal_timeout_s: float = 30.0
    terminal_max_timeout_s: float = 300.0
    code_exec_timeout_s: float = 30.0
    code_exec_max_timeout_s: float = 300.0
    code_exec_memory_mb: int = 512
    code_exec_python: str = sys.executable
    # Names of the server's environment variables code_exec passes on (none by default).
    code_exec_env: tuple[str, ...] = ()
    terminal_memory_mb: int = 512
    # Processes (and threads) of one sandboxed call's whole tree, where a cgroup counts them.
    sandbox_max_processes: int = 128
    # The operator's escape hatch: code_exec and terminal without the bubblewrap sandbox.
    unsandboxed_tools: bool = False
    # Navi as root: the host user sandboxed code runs as ("": navi-sandbox, made if
    # missing; a name, a uid or uid:gid). tools/sandbox_user.py.
    sandbox_user: str = ""
    # Sandboxed calls running at once: in this server, and of one user (more wait).
    max_sandboxes: int = 8
    user_max_sandboxes: int = 2
    # Memory of all sandboxes together (their parent cgroup); 0: half the machine's.
    sandboxes_memory_mb: int = 0
    # What one sandboxed call may add to the folders it writes (the session's files, its
    # working directory) before it is ended; also the size of its /tmp and /dev/shm.
    sandbox_write_limit_mb: int = 1024
    kill_grace_s: float = 1.0
    http_timeout_s: float = 20.0
    http_max_bytes: int = 5 * 1024 * 1024
    # The operator's escape hatch for http_request, web_view, image_view and web_search:
    # loopback and private ranges reachable (never link-local or cloud metadata).
    allow_private_urls: bool = False
    # Navi's own listening port (NAVI_PORT): tools never connect to it on this machine.
    navi_port: int | None = 8000
    web_view_max_chars: int = 20_000
    image_max_bytes: int = 5 * 1024 * 1024
    ssh_timeout_s: float = 30.0
    ssh_max_timeout_s: float = 600.0
    scratchpad_max_chars: int = 20_000

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ToolSettings:
        """Settings from environment variables (``os.environ`` by default); unset means default."""
        env = os.environ if env is None else env
        defaults = cls()

        def text(key: str, default: str) -> str:
            value = env.get(key, "").strip()
            return value or default

        def number(key: str, default: float) -> float:
            raw = env.get(key, "").strip()
            if not raw:
                return default
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"{key} must be a number, got {raw!r}") from None
            if value <= 0:
                raise ValueError(f"{key} must be positive, got {raw!r}")
            return value

        def names(key: str) -> tuple[str, ...] | None:
            raw = env.get(key, "").strip()
            if not raw:
                return None
            return tuple(part.strip() for part in raw.split(",") if part.strip())

        def flag(key: str) -> bool:
            return env.get(key, "").strip().lower() in ("1", "true", "yes", "on")

        searxng = env.get("SEARXNG_URL", "").strip() or None
        # Navi's own port (navi/config.py reads it too); 0 lets the system choose one.
        zero = env.get("NAVI_PORT", "").strip() == "0"
        navi_port = None if zero else int(number("NAVI_PORT", defaults.navi_port or 8000))
        return cls(
            fs_allowed_paths=names("FS_ALLOWED_PATHS"),
            terminal_allowed_commands=names("TERMINAL_ALLOWED_COMMANDS")
            or defaults.terminal_allowed_commands,
            ssh_hosts_file=text("SSH_HOSTS_FILE", defaults.ssh_hosts_file),
            searxng_url=searxng,
            tools_dir=text("TOOLS_DIR", defaults.tools_dir),
            manuals_dir=text("TOOLS_MANUALS_DIR", defaults.manuals_dir),
            output_max_chars=int(number("TOOL_OUTPUT_MAX_CHARS", defaults.output_max_chars)),
            default_timeout_s=number("TOOL_TIMEOUT_S", defaults.default_timeout_s),
            terminal_timeout_s=number("TERMINAL_TIMEOUT_S", defaults.terminal_timeout_s),
            code_exec_timeout_s=number("CODE_EXEC_TIMEOUT_S", defaults.code_exec_timeout_s),
            code_exec_memory_mb=int(number("CODE_EXEC_MEMORY_MB", defaults.code_exec_memory_mb)),
            code_exec_python=text("CODE_EXEC_PYTHON", defaults.code_exec_python),
            code_exec_env=names("CODE_EXEC_ENV") or (),
            terminal_memory_mb=int(number("TERMINAL_MEMORY_MB", defaults.terminal_memory_mb)),
            sandbox_max_processes=int(
                number("SANDBOX_MAX_PROCESSES", defaults.sandbox_max_processes)
            ),
            unsandboxed_tools=flag("NAVI_UNSANDBOXED_TOOLS"),
            sandbox_user=env.get("NAVI_SANDBOX_USER", "").strip(),
            max_sandboxes=int(number("NAVI_MAX_SANDBOXES", defaults.max_sandboxes)),
            user_max_sandboxes=int(number("NAVI_USER_MAX_SANDBOXES", defaults.user_max_sandboxes)),
            sandboxes_memory_mb=int(
                number("NAVI_SANDBOXES_MEMORY_MB", defaults.sandboxes_memory_mb)
            ),
            sandbox_write_limit_mb=int(
                number("NAVI_SANDBOX_WRITE_LIMIT_MB", defaults.sandbox_write_limit_mb)
            ),
            allow_private_urls=flag("NAVI_ALLOW_PRIVATE_URLS"),
            navi_port=navi_port,
            http_timeout_s=number("HTTP_TIMEOUT_S", defaults.http_timeout_s),
            http_max_bytes=int(number("HTTP_MAX_BYTES", defaults.http_max_bytes)),
            image_max_bytes=int(number("IMAGE_MAX_BYTES", defaults.image_max_bytes)),
            ssh_timeout_s=number("SSH_TIMEOUT_S", defaults.ssh_timeout_s),
        )

    @property
    def tools_path(self) -> Path:
        return Path(self.tools_dir)

    @property
    def manuals_path(self) -> Path:
        return Path(self.manuals_dir)
