"""Accounts: who may use Navi, with which role, and which tools they may run.

Bound to a loopback address with no token configured, Navi has one local user
(``local``, admin) and no login. Otherwise every request needs a token: ``NAVI_API_TOKEN``
(user ``local``, admin) or one from the users file (``NAVI_USERS_FILE``), a JSON list of

    {"id": "alice", "token_sha256": "<hex>", "role": "user", "tools": ["web_search", …],
     "grants": ["lan", …]}

(``token`` in clear instead of ``token_sha256`` still works; ``navi users add`` writes
the hash). Roles: an ``admin`` may use every tool a profile enables; a ``user`` only
the tools named in ``tools``, or, without that list, every tool but the ones that act
on the machine (``RESTRICTED_TOOLS``, MCP servers' tools and user tools). ``grants`` widen a ``user``'s reach (LAN
addresses, the sandbox's network: navi/grants.py); an admin has them all. The users
file is read again when it changes.

A server open to the local user watches the users file it would read (the data
folder's ``users.json``): once one appears (``navi users add``), open access ends
within a second and every request needs a token, for good: a file that is then
unreadable or deleted refuses everyone (logged) rather than opening up again.

The run asks ``Users.refusal`` before each tool call (navi/run/permissions.py), so this
module knows nothing of HTTP (that is navi/server/auth.py).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
import secrets
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import structlog

from navi.grants import GRANTS

log = structlog.get_logger(__name__)

Role = Literal["admin", "user"]
# A user id ends up in stream names (``memory:<id>``) and logs: keep it plain.
UserId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")]

_SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")

# What a ``user`` may not run unless the users file grants it: these act on the machine
# (run code or commands, write or load tools) or on other machines.
RESTRICTED_TOOLS = frozenset({"code_exec", "terminal", "ssh_exec", "write_tool", "reload_tools"})
# MCP servers' tools (``mcp__<server>__<tool>``) too: a stdio server runs on the machine
# with Navi's rights, and what its tools do is the server's to say, not Navi's.
RESTRICTED_PREFIXES = ("mcp__",)
MIN_TOKEN_CHARS = 16
# How often a changed users file is noticed (one stat per interval, not per request).
RELOAD_CHECK_S = 1.0


class User(msgspec.Struct, frozen=True, kw_only=True):
    id: UserId
    role: Role = "user"
    token: str = ""
    token_sha256: str = ""
    # The tools a ``user`` may use; None: all but the restricted ones. Admins may use all.
    tools: tuple[str, ...] | None = None
    # The reach a ``user`` has beyond the defaults (navi/grants.py); admins have it all.
    grants: tuple[str, ...] = ()

    def may_use(self, tool: str, *, restricted: bool = False) -> bool:
        """``restricted``: the caller knows the tool acts on the machine although its name
        is not fixed (a user tool: tools.ToolRegistry.is_user_tool)."""
        if self.role == "admin":
            return True
        if self.tools is not None:
            return tool in self.tools
        if restricted:
            return False
        return tool not in RESTRICTED_TOOLS and not tool.startswith(RESTRICTED_PREFIXES)

    def has_grant(self, grant: str) -> bool:
        return self.role == "admin" or grant in self.grants

    @property
    def digest(self) -> bytes:
        """The SHA-256 of the token, whichever way the file gives it."""
        if self.token_sha256:
            return bytes.fromhex(self.token_sha256)
        return hashlib.sha256(self.token.encode()).digest()


LOCAL_USER = User(id="local", role="admin")


class AuthConfigError(ValueError):
    pass


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


def read_users_file(path: Path) -> list[User]:
    try:
        users = msgspec.json.decode(path.read_bytes(), type=list[User])
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise AuthConfigError(f"cannot read the users file {path}: {exc}") from exc
    seen: set[str] = set()
    for user in users:
        where = f"{path}: user {user.id!r}"
        if user.id in seen:
            raise AuthConfigError(f"{where} is listed twice")
        seen.add(user.id)
        if user.token and user.token_sha256:
            raise AuthConfigError(f"{where} has both 'token' and 'token_sha256': keep one")
        if user.token_sha256:
            if not _SHA256_HEX.fullmatch(user.token_sha256):
                raise AuthConfigError(f"{where}: 'token_sha256' must be 64 hex digits")
        elif len(user.token) < MIN_TOKEN_CHARS:
            raise AuthConfigError(
                f"{where} needs a token of at least {MIN_TOKEN_CHARS} characters "
                "(or its 'token_sha256'; `navi users add` makes one)"
            )
        if user.role == "admin" and user.tools is not None:
            raise AuthConfigError(
                f"{where} is an admin, who may use every tool: drop 'tools' or make the role 'user'"
            )
        _check_grants(where, user.role, user.grants)
    return users


def _check_grants(where: str, role: str, grants: tuple[str, ...]) -> None:
    unknown = [g for g in grants if g not in GRANTS]
    if unknown:
        raise AuthConfigError(
            f"{where} has the unknown grant {', '.join(map(repr, unknown))}: the grants "
            f"are {', '.join(map(repr, GRANTS))}"
        )
    if role == "admin" and grants:
        raise AuthConfigError(
            f"{where} is an admin, who has every grant: drop 'grants' or make the role 'user'"
        )


class Users:
    """The users a server knows, by token and by id."""

    def __init__(
        self,
        users: list[User],
        *,
        open_access: bool,
        path: Path | None = None,
        api_token: str = "",
    ) -> None:
        self._open = open_access
        self.path = path
        self.api_token = api_token
        self._checked = 0.0
        self._stamp = _stamp(path) if path is not None else None
        self._set(users)

    @property
    def open_access(self) -> bool:
        """No token needed: every request is the local user's. Ends for good when a
        users file appears at ``path`` (checked at most once a second)."""
        if self._open:
            self.refresh()
        return self._open

    def _set(self, users: list[User]) -> None:
        self.users = users
        self._by_id = {u.id: u for u in users}

    @classmethod
    def load(cls, *, api_token: str, users_file: str, watch: str = "") -> Users:
        """The users of the settings, without the network check of ``configure``.
        ``watch``: the users file to look for when there is none yet (open access ends
        when it appears)."""
        path = Path(users_file) if users_file else None
        users = read_users_file(path) if path is not None else []
        if api_token:
            users.append(User(id="local", role="admin", token=api_token))
        if path is None and watch:
            path = Path(watch)
        return cls(users, open_access=not users, path=path, api_token=api_token)

    @classmethod
    def configure(cls, *, host: str, api_token: str, users_file: str, watch: str = "") -> Users:
        users = cls.load(api_token=api_token, users_file=users_file, watch=watch)
        if users.open_access and not is_loopback(host):
            raise AuthConfigError(
                f"Navi is bound to {host}, which is not a loopback address: set NAVI_API_TOKEN "
                "(or NAVI_USERS_FILE) so that nobody else on the network can use it"
            )
        return users

    def authenticate(self, token: str | None) -> User | None:
        if self.open_access:
            return LOCAL_USER
        if not token:
            return None
        self.refresh()
        digest = hashlib.sha256(token.encode()).digest()
        found = None
        for user in self.users:  # every entry compared: the time says nothing
            if hmac.compare_digest(user.digest, digest):
                found = user
        return found

    def get(self, user_id: str) -> User | None:
        """The user of this id. ``local`` is the machine's operator when the users file
        does not name it: open access, ``NAVI_API_TOKEN``, or the CLI."""
        if self.open_access:
            return LOCAL_USER if user_id == LOCAL_USER.id else None
        self.refresh()
        user = self._by_id.get(user_id)
        if user is None and user_id == LOCAL_USER.id:
            return LOCAL_USER
        return user

    def refusal(self, user_id: str, tool: str, *, restricted: bool = False) -> str | None:
        """Why this user may not use this tool, or None when they may (``restricted``: as
        for :meth:`User.may_use`)."""
        user = self.get(user_id)
        if user is None:
            return f"user {user_id} is not a user of this server and may not use tool {tool}"
        if user.may_use(tool, restricted=restricted):
            return None
        return (
            f"user {user.id} may not use tool {tool} (role {user.role}); "
            "do the task without it, or tell the user that an admin can grant it"
        )

    def refresh(self) -> None:
        """Read the users file again if it changed (checked at most once a second). A
        file that no longer reads keeps the users as they were, and says so in the log."""
        if self.path is None:
            return
        now = time.monotonic()
        if now - self._checked < RELOAD_CHECK_S:
            return
        self._checked = now
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            users = read_users_file(self.path)
        except AuthConfigError as exc:
            log.error("users.reload_failed", error=str(exc))
            if self._open:  # a users file appeared: its intent is tokens, fail closed
                self._end_open_access([])
            return
        if self.api_token:
            users.append(User(id="local", role="admin", token=self.api_token))
        if self._open:
            self._end_open_access(users)
            return
        self._set(users)
        log.info("users.reloaded", users=len(users))

    def _end_open_access(self, users: list[User]) -> None:
        self._set(users)
        self._open = False
        log.warning(
            "users.open_access_ended",
            path=str(self.path),
            users=len(users),
            message="a users file appeared: every request needs a token from now on",
        )


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def add_user(
    path: Path,
    user_id: str,
    *,
    role: Role = "user",
    tools: tuple[str, ...] | None = None,
    grants: tuple[str, ...] = (),
) -> str:
    """Add a user with a new token to the users file (made if missing) and return the
    token: the file keeps only its hash. Other entries are kept as they are."""
    try:
        msgspec.convert({"id": user_id, "role": role}, User)
    except msgspec.ValidationError:
        raise AuthConfigError(
            f"{user_id!r} cannot be a user id: use up to 64 letters, digits, '_', '.', '@' "
            "or '-', starting with a letter or digit"
        ) from None
    if role == "admin" and tools is not None:
        raise AuthConfigError("an admin may use every tool: give --tools to role 'user' only")
    _check_grants(f"user {user_id!r}", role, grants)
    entries: list[dict[str, Any]] = []
    if path.exists():
        read_users_file(path)  # refuse to extend a file the server could not read
        entries = msgspec.json.decode(path.read_bytes(), type=list[dict[str, Any]])
    if any(entry.get("id") == user_id for entry in entries):
        raise AuthConfigError(f"{path} already has a user {user_id!r}")
    token = new_token()
    entry: dict[str, Any] = {"id": user_id, "role": role, "token_sha256": hash_token(token)}
    if tools is not None:
        entry["tools"] = list(tools)
    if grants:
        entry["grants"] = list(grants)
    entries.append(entry)
    _write_private(path, msgspec.json.format(msgspec.json.encode(entries)) + b"\n")
    return token


def _write_private(path: Path, data: bytes) -> None:
    """Replace the file at once (a reader never sees half of it), readable by its owner
    only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
