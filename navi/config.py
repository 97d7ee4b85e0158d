"""Navi's settings: the environment (and ``.env``) read once into frozen structs.

The LLM and tool settings are their packages' own structs; this one composes them and
adds what the application itself needs. Every variable is documented in
docs/configuration.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

import msgspec

from navi.data_dir import USERS_FILE, data_defaults
from navi.llm.settings import LLMSettings
from tools.settings import ToolSettings

T = TypeVar("T")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class SettingsError(ValueError):
    """A setting has a value Navi cannot use; the message names the variable."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    # NAVI_DATA_DIR (navi/data_dir.py): the folder the defaults of the database, blobs,
    # session files, user tools, mcp.json and users file are in ("" only for Settings
    # made in code: paths relative to the current folder, as these defaults say).
    data_dir: str = ""
    # What to tell the operator about the data folder (an older install's ./navi.db in use).
    data_notes: tuple[str, ...] = ()
    database_url: str = "sqlite:///navi.db"
    log_level: str = "INFO"
    host: str = "127.0.0.1"
    port: int = 8000
    session_files_dir: str = "session_files"
    session_files_max_size_mb: int = 200
    session_files_ttl_hours: float = 24.0
    # The edge (docs/deployment.md, "Security model"): host names and page origins
    # answered besides Navi's own, the largest JSON body, the largest import file.
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = 1024 * 1024
    max_import_mb: int = 64
    # Images of messages, stored once by content (navi/blobs.py; "" = beside the
    # database), and what one user's images and uploads may take in all.
    blobs_dir: str = ""
    user_quota_mb: int = 1024
    # What one user may make (docs/configuration.md, "Limits per user"); 0: no limit.
    user_max_sessions: int = 1000
    user_imports_per_hour: int = 20
    # NAVI_MAX_LIVE_RUNS: runs of this node that stream at once; more wait in a fair
    # queue (navi/run/limiter.py, docs/configuration.md). 0: no limit.
    max_live_runs: int = 64
    # NAVI_MCP_CONFIG: the MCP servers' config file ("" = mcp.json in the data folder).
    mcp_config: str = ""
    resume_on_start: bool = True
    api_token: str = ""
    users_file: str = ""
    # Signs the browser's WebSocket tickets; the same on every node of a cluster (empty:
    # each process draws its own key, so a ticket works on the node that issued it).
    ws_ticket_secret: str = ""
    default_profile: str = "secretary"
    compression_enabled: bool = True
    compression_threshold: float = 0.80
    compression_keep_recent: int = 10
    compression_summary_temperature: float = 0.3
    llm_retries: int = 3
    llm_retry_backoff_s: float = 1.0
    # NAVI_MEMORY_EXTRACT_AFTER_S: a session is read for facts this long after its last
    # event (a run ended and nothing was said since). MEMORY_IDLE_MINUTES, the older
    # setting, still counts when the new one is not set.
    memory_extract_after_s: float = 120.0
    # NAVI_PLANNING: "on" plans when a profile asks for it; "off" never; "auto" is "on"
    # except with the embedded model (too small to plan usefully).
    planning: str = "auto"
    # NAVI_TOOL_APPROVAL: the approval policy of every tool a profile does not set itself
    # ("ask" or "auto"; "": each tool's own default, navi/run/approval.py). "auto" means
    # no prompts at all: for scripts and test rigs.
    tool_approval: str = ""
    # NAVI_APPROVAL_TIMEOUT: seconds a call waits for a decision before it is denied
    # (reason "timeout"); None waits as long as it takes, across restarts.
    approval_timeout_s: float | None = None
    # NAVI_EMBEDDED_TOOLS: offer tools to the embedded model too (off: it only chats).
    embedded_tools: bool = False
    # Several nodes on one PostgreSQL (navi/cluster, docs/deployment.md): how often each
    # node looks for sessions whose owner is gone, and when it lets go of an idle one.
    # NAVI_DB_TIMEOUT_S: the longest any PostgreSQL wait may take (a lock, a statement, a
    # transaction left open by a frozen node): docs/deployment.md, "Failures".
    db_timeout_s: float = 10.0
    cluster_sweep_s: float = 1.0
    cluster_idle_release_s: float = 600.0
    llm: LLMSettings = msgspec.field(default_factory=LLMSettings)
    tools: ToolSettings = msgspec.field(default_factory=ToolSettings)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        d = cls()

        def get(name: str, parse: Callable[[str, str], T], default: T) -> T:
            raw = env.get(name, "").strip()
            return parse(name, raw) if raw else default

        data = data_defaults(env)
        database = env.get("NAVI_DATABASE_URL", "").strip()
        if not database and env.get("DB_PATH", "").strip():
            database = f"sqlite:///{env['DB_PATH'].strip()}"
        try:
            tools = ToolSettings.from_env(
                {**env, "TOOLS_DIR": env.get("TOOLS_DIR", "").strip() or data.tools_dir}
            )
        except ValueError as exc:
            raise SettingsError(str(exc)) from exc
        return cls(
            data_dir=data.data_dir,
            data_notes=data.notes,
            database_url=database or data.database_url,
            log_level=get("LOG_LEVEL", _level, d.log_level),
            host=env.get("NAVI_HOST", "").strip() or d.host,
            port=get("NAVI_PORT", _int, d.port),
            session_files_dir=env.get("SESSION_FILES_DIR", "").strip() or data.session_files_dir,
            session_files_max_size_mb=get(
                "SESSION_FILES_MAX_SIZE_MB", _int, d.session_files_max_size_mb
            ),
            session_files_ttl_hours=get(
                "SESSION_FILES_TTL_HOURS", _float, d.session_files_ttl_hours
            ),
            blobs_dir=env.get("NAVI_BLOBS_DIR", "").strip(),
            user_quota_mb=get("NAVI_USER_QUOTA_MB", _int, d.user_quota_mb),
            user_max_sessions=get("NAVI_USER_MAX_SESSIONS", _int, d.user_max_sessions),
            user_imports_per_hour=get("NAVI_USER_IMPORTS_PER_HOUR", _int, d.user_imports_per_hour),
            max_live_runs=get("NAVI_MAX_LIVE_RUNS", _int, d.max_live_runs),
            mcp_config=env.get("NAVI_MCP_CONFIG", "").strip(),
            allowed_hosts=get("NAVI_ALLOWED_HOSTS", _hosts, d.allowed_hosts),
            allowed_origins=get("NAVI_ALLOWED_ORIGINS", _origins, d.allowed_origins),
            max_body_bytes=get("NAVI_MAX_BODY_BYTES", _int, d.max_body_bytes),
            max_import_mb=get("NAVI_MAX_IMPORT_MB", _int, d.max_import_mb),
            resume_on_start=get("NAVI_RESUME_ON_START", _bool, d.resume_on_start),
            api_token=env.get("NAVI_API_TOKEN", "").strip(),
            users_file=env.get("NAVI_USERS_FILE", "").strip() or data.users_file,
            ws_ticket_secret=env.get("NAVI_WS_TICKET_SECRET", "").strip(),
            default_profile=env.get("NAVI_DEFAULT_PROFILE", "").strip() or d.default_profile,
            compression_enabled=get("CONTEXT_COMPRESSION_ENABLED", _bool, d.compression_enabled),
            compression_threshold=get(
                "CONTEXT_COMPRESSION_THRESHOLD", _fraction, d.compression_threshold
            ),
            compression_keep_recent=get("CONTEXT_KEEP_RECENT", _int, d.compression_keep_recent),
            compression_summary_temperature=get(
                "CONTEXT_SUMMARY_TEMPERATURE", _float, d.compression_summary_temperature
            ),
            llm_retries=get("LLM_RETRIES", _int, d.llm_retries),
            llm_retry_backoff_s=get("LLM_RETRY_BACKOFF_S", _float, d.llm_retry_backoff_s),
            memory_extract_after_s=get(
                "NAVI_MEMORY_EXTRACT_AFTER_S",
                _float,
                get("MEMORY_IDLE_MINUTES", _float, d.memory_extract_after_s / 60) * 60,
            ),
            planning=get("NAVI_PLANNING", _choice("auto", "on", "off"), d.planning),
            embedded_tools=get("NAVI_EMBEDDED_TOOLS", _bool, d.embedded_tools),
            tool_approval=get("NAVI_TOOL_APPROVAL", _choice("ask", "auto"), d.tool_approval),
            approval_timeout_s=get("NAVI_APPROVAL_TIMEOUT", _float, d.approval_timeout_s),
            db_timeout_s=get("NAVI_DB_TIMEOUT_S", _float, d.db_timeout_s),
            cluster_sweep_s=get("NAVI_CLUSTER_SWEEP_S", _float, d.cluster_sweep_s),
            cluster_idle_release_s=get(
                "NAVI_CLUSTER_IDLE_RELEASE_S", _float, d.cluster_idle_release_s
            ),
            llm=_llm(env),
            tools=tools,
        )

    @property
    def files_root(self) -> Path:
        return Path(self.session_files_dir)

    @property
    def blobs_root(self) -> Path:
        """``NAVI_BLOBS_DIR``, else ``blobs/`` beside a SQLite database file (the images
        go where the events that name them go), else ``blobs/`` in the data folder
        (PostgreSQL, in-memory SQLite)."""
        if self.blobs_dir:
            return Path(self.blobs_dir)
        scheme, _, path = self.database_url.partition(":///")
        if scheme.lower() in {"sqlite", "sqlite+aiosqlite"} and path and ":memory:" not in path:
            return Path(path).parent / "blobs"
        return self._data_root / "blobs"

    @property
    def users_file_watched(self) -> str:
        """The users file a server without one looks for (where ``navi users add``
        writes by default: the data folder's): open access ends when it appears."""
        if self.users_file or not self.data_dir:
            return ""
        return str(Path(self.data_dir) / USERS_FILE)

    @property
    def mcp_config_path(self) -> Path:
        """``NAVI_MCP_CONFIG``, else ``mcp.json`` in the data folder."""
        if self.mcp_config:
            return Path(self.mcp_config).expanduser()
        return self._data_root / "mcp.json"

    @property
    def llm_key_path(self) -> Path:
        """Where the API key saved on the settings page is kept (mode 0600; never in
        the event log: navi/llm/connection.py)."""
        return self._data_root / "secrets" / "llm_api_key"

    @property
    def _data_root(self) -> Path:
        # Settings made in code have no data folder: the session files' parent stands in.
        return Path(self.data_dir) if self.data_dir else self.files_root.absolute().parent


def _llm(env: Mapping[str, str]) -> LLMSettings:
    try:
        return LLMSettings.from_env(env)
    except ValueError as exc:
        raise SettingsError(str(exc)) from exc


def _int(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a whole number, got {raw!r}") from None
    if value < 0:
        raise SettingsError(f"{name} must not be negative, got {raw!r}")
    return value


def _float(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {raw!r}") from None
    if value < 0:
        raise SettingsError(f"{name} must not be negative, got {raw!r}")
    return value


def _fraction(name: str, raw: str) -> float:
    value = _float(name, raw)
    if not 0 < value <= 1:
        raise SettingsError(f"{name} must be between 0 and 1, got {raw!r}")
    return value


def _bool(name: str, raw: str) -> bool:
    low = raw.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise SettingsError(f"{name} must be true or false, got {raw!r}")


def _hosts(name: str, raw: str) -> tuple[str, ...]:
    """Host names or addresses, ``*.domain`` or ``*``; no scheme, port or path."""
    hosts = tuple(h.strip().lower() for h in raw.split(",") if h.strip())
    for host in hosts:
        bare = host.strip("[]")
        if "/" in host or "@" in host or (":" in bare and bare.count(":") < 2):
            raise SettingsError(
                f"{name} lists host names without scheme or port (e.g. navi.example.org), "
                f"got {host!r}"
            )
    return hosts


def _origins(name: str, raw: str) -> tuple[str, ...]:
    """Origins as browsers send them: ``scheme://host[:port]``, http or https."""
    origins = tuple(o.strip().rstrip("/") for o in raw.split(",") if o.strip())
    for origin in origins:
        try:
            parts = urlsplit(origin)
            _ = parts.port  # raises on a port that is not a number
        except ValueError:
            parts = None
        if (
            parts is None
            or parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path
            or parts.query
            or parts.username
        ):
            raise SettingsError(
                f"{name} lists origins like https://navi.example.org (scheme, host, port "
                f"if not the default; no path), got {origin!r}"
            )
    return origins


def _choice(*options: str) -> Callable[[str, str], str]:
    def parse(name: str, raw: str) -> str:
        value = raw.strip().lower()
        if value not in options:
            raise SettingsError(f"{name} must be one of {', '.join(options)}, got {raw!r}")
        return value

    return parse


def _level(name: str, raw: str) -> str:
    level = raw.upper()
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
        raise SettingsError(f"{name} must be DEBUG, INFO, WARNING or ERROR, got {raw!r}")
    return level
