"""One MCP server: its connection, kept alive, and its tools kept in the registry.

:meth:`ServerConnection.run` connects (a stdio child process, or Streamable HTTP),
lists the tools (and its resources and prompts), puts them in the registry as the source
``mcp:<server>``, then checks every few seconds that the server still answers
(``tools/list``: ping is gone from the protocol since 2026-07-28). A server that says its
tools changed (``notifications/tools/list_changed``) is listed again at once; its log
lines and progress go where navi/mcp/notices.py says; its resources are read through
``mcp__<server>__read_resource`` (navi/mcp/resources.py). When the server
dies it is started again, after 0.5 s, then 1, 2, 4... up to 30 s (the wait starts
over once a connection has lasted a minute). Meanwhile its tools stay listed and a
call of one fails at once, saying the server is down and why.

A stdio server's environment is what its entry's ``env`` names plus ``PATH``,
``HOME``, ``LANG`` (and the SDK's own ``LOGNAME``, ``SHELL``, ``TERM``, ``USER``) and
Navi's proxy and CA variables (navi/mcp/transports.py): never Navi's secrets. With
``"sandbox": true`` the child runs in the tool sandbox: what it sees there is
navi/mcp/sandbox.py's. When it fails to start, the error quotes the
end of its stderr, read once it has stopped.

A remote server without a token in its entry's ``headers`` signs in with OAuth when the
connection has a place for it (``oauth``): while the sign-in waits for a person, the
state is ``needs-sign-in`` and the status names the link (navi/mcp/oauth.py).
"""

from __future__ import annotations

import tempfile
from contextlib import AsyncExitStack
from typing import IO, TYPE_CHECKING, Any, cast

import anyio
import structlog

from navi.log_redaction import hide_values, redact_text
from navi.mcp.config import ServerEntry, tool_name
from navi.mcp.notices import CallMessages, ServerNotices, listen_for_changes
from navi.mcp.oauth import OAuthPlaces, SignInFlow, SignIns, oauth_provider, uses_oauth
from navi.mcp.oauth_storage import token_file
from navi.mcp.prompts import PromptInfo, prompt_infos
from navi.mcp.resources import ReadResourceTool, ResourceIndex
from navi.mcp.sandbox import SandboxPlaces
from navi.mcp.status import (
    SIGN_IN_NEEDED,
    TOKEN_REFUSED,
    WAITING_FOR_SIGN_IN,
    ServerStatus,
    StartFailed,
    State,
    answered_401,
    describe_error,
    stderr_tail,
)
from navi.mcp.tools import adapt
from navi.mcp.transports import open_transport
from tools.base import Tool, ToolError
from tools.registry import ToolRegistry
from tools.sandbox import loopback_failed

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import CallToolResult, GetPromptResult, ReadResourceResult

log = structlog.get_logger(__name__)

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0
# A connection that lasted this long was healthy: the next failure waits BACKOFF_FIRST_S.
STABLE_S = 60.0
# Connecting and listing the tools must be done in this time.
START_TIMEOUT_S = 30.0
CHECK_INTERVAL_STDIO_S = 2.0
CHECK_INTERVAL_HTTP_S = 15.0
CHECK_TIMEOUT_S = 10.0
REFRESH_GAP_S = 1.0
# Pages of a listing (tools, resources, templates, prompts) read at most.
PAGES_MAX = 100
# The registry's time limit ends a call first; the SDK's own is a backstop.
CALL_TIMEOUT_SLACK_S = 5.0


class ServerDown(ToolError):
    """A call reached a server that is not connected; the message says why."""


class ServerConnection:
    """One configured server, connected for as long as :meth:`run` runs."""

    def __init__(
        self,
        entry: ServerEntry,
        registry: ToolRegistry,
        *,
        timeout_s: float = 60.0,
        places: SandboxPlaces | None = None,
        oauth: OAuthPlaces | None = None,
        sign_ins: SignIns | None = None,
    ) -> None:
        self.entry = entry
        # What its ${VAR}s gave never shows in a log line or an error message.
        hide_values(entry.hidden)
        # Where a sandboxed server's home goes and what its sandbox never shows.
        self.places = places
        self.server = entry.name
        # Where its OAuth sign-in is kept, and where a waiting sign-in is found by the
        # callback route (navi/mcp/oauth.py); None: a 401 is only reported.
        self.oauth = oauth if oauth is not None and uses_oauth(entry) else None
        self.sign_ins = sign_ins if sign_ins is not None else SignIns()
        # Whether its HTTP client has the OAuth provider: only once a sign-in is kept or
        # the server answered 401. The SDK's provider holds a lock until each answer's
        # headers come, so a server that wants no sign-in never pays for it (a slow call
        # answered as plain JSON would hold up the periodic listing).
        self._signs_in = False
        self.registry = registry
        # The entry's own "timeout" wins over Navi's default.
        self.timeout_s = entry.timeout or timeout_s
        self._dropped: tuple[str, ...] = ()
        self._client: Client | None = None
        # List changes, log lines and progress the server sends (navi/mcp/notices.py).
        self.notices = ServerNotices(self.server)
        # What mcp__<server>__read_resource may read (navi/mcp/resources.py).
        self.resources = ResourceIndex()
        self._prompts: tuple[str, ...] = ()
        # Its prompts as a client's prompt menu shows them (navi/mcp/prompts.py: bounded).
        self.prompt_list: tuple[PromptInfo, ...] = ()
        # The HTTP server's last answer was 401 (it wants a sign-in).
        self._unauthorized = False
        # What the server listed last, as published in the registry (None: nothing yet).
        self._listed: tuple[tuple[str, str], ...] | None = None
        self.state: State = "starting"
        self.error = ""
        self.restarts = 0
        self._ran = False
        # This attempt got as far as a running connection (a later failure is no start's).
        self._connected = False
        # Set once the first start has connected or failed (start-up may wait for it).
        self.first_attempt = anyio.Event()

    @property
    def source(self) -> str:
        return f"mcp:{self.server}"

    def status(self) -> ServerStatus:
        return ServerStatus(
            name=self.server,
            transport=self.entry.transport,
            state=self.state,
            error=self.error,
            tools=len(self.registry.external_tools(self.source)),
            restarts=self.restarts,
            sandboxed=self.entry.sandbox and bool(self.entry.command),
            dropped=self._dropped,
            resources=len(self.resources.resources) + len(self.resources.templates),
            prompts=self._prompts,
            sign_in=self.oauth.sign_in_link(self.server)
            if self.oauth and self.state == "needs-sign-in"
            else "",
        )

    # ------------------------------------------------------------------ life

    async def run(self) -> None:
        """Connect and stay connected, restarting with backoff; ends only when cancelled
        (the tools then leave the registry)."""
        delay = BACKOFF_FIRST_S
        try:
            while True:
                began = anyio.current_time()
                try:
                    await self._serve_once()
                    why = "the connection ended"
                except Exception as exc:  # any failure means: start it again
                    why = describe_error(exc)
                self._client = None
                self.error = why
                self.first_attempt.set()
                if anyio.current_time() - began > STABLE_S:
                    delay = BACKOFF_FIRST_S
                # "failed" until it has once run; "restarting" after it ran and died.
                self.state = "restarting" if self._ran else "failed"
                log.warning("mcp.server_down", server=self.server, error=why, retry_in_s=delay)
                await anyio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX_S)
                self.restarts += 1
        finally:
            self._client = None
            self._listed = None
            self.state = "stopped"
            self.first_attempt.set()
            self.registry.remove_external(self.source)

    async def _serve_once(self) -> None:
        # The child's stderr (not Navi's own), quoted when it fails: read once the child
        # has stopped, with all it had to say.
        for attempt in (1, 2):
            self._connected = False
            with tempfile.TemporaryFile() as errlog:
                try:
                    await self._connect_and_watch(errlog)
                except Exception as exc:
                    # bubblewrap's loopback now and then fails before the server starts
                    # (tools/sandbox.py): started once more at once, not after a backoff.
                    if (
                        attempt == 1
                        and not self._connected
                        and loopback_failed(stderr_tail(errlog))
                    ):
                        continue
                    # A 401 before any sign-in: connected again at once, signing in.
                    if attempt == 1 and not self._connected and self._sign_in_now(exc):
                        continue
                    raise StartFailed(self._why(exc, errlog)) from exc
            return

    async def _connect_and_watch(self, errlog: IO[bytes]) -> None:
        from mcp import Client
        from mcp_types import Implementation

        self.notices = ServerNotices(self.server)
        self._unauthorized = False
        async with AsyncExitStack() as stack:
            auth = None
            if self.oauth is not None and (self._signs_in or self._kept_sign_in()):
                self._signs_in = True
                flow = SignInFlow(self.server, self.sign_ins, self._waiting_for_sign_in)
                auth = oauth_provider(self.entry, self.oauth, flow)
            transport = await open_transport(
                self.entry,
                stack,
                errlog,
                places=self.places,
                on_response=self._note_status,
                auth=auth,
            )
            client = Client(
                transport,
                cache=None,
                read_timeout_seconds=self._start_timeout_s,
                client_info=Implementation(name="navi", version="0.1.0"),
                message_handler=self.notices.on_message,
                logging_callback=self.notices.on_log,
                # A 2026-07-28 server sends log lines only to requests that ask for them.
                log_level="info",
            )
            await stack.enter_async_context(client)
            await self._list_offers(client)
            await self._refresh(client)
            tg = await stack.enter_async_context(anyio.create_task_group())
            tg.start_soon(listen_for_changes, client, self.notices)
            self._client = client
            self._connected = True
            self.state, self.error, self._ran = "running", "", True
            self.first_attempt.set()
            log.info("mcp.server_started", server=self.server, tools=len(self._listed or ()))
            interval = CHECK_INTERVAL_STDIO_S if self.entry.command else CHECK_INTERVAL_HTTP_S
            while True:
                with anyio.move_on_after(interval):
                    await self.notices.wake.wait()
                changed = self.notices.take_changes()
                with anyio.fail_after(self.entry.timeout or CHECK_TIMEOUT_S):
                    if "others" in changed:
                        await self._list_offers(client)
                    await self._refresh(client, force="others" in changed)
                if changed:
                    # A server flooding list_changed costs one listing a REFRESH_GAP_S.
                    await anyio.sleep(REFRESH_GAP_S)

    def _why(self, exc: BaseException, errlog: IO[bytes]) -> str:
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        from mcp import MCPError

        timed_out = isinstance(exc, TimeoutError) or (
            isinstance(exc, MCPError) and "timed out" in exc.error.message
        )
        if isinstance(exc, FileNotFoundError) and self.entry.command:
            why = f"command not found: {self.entry.command}"
        elif _oauth_error(exc):
            why = (
                f"its OAuth sign-in failed: {str(exc).strip() or type(exc).__name__}; "
                'if the server takes a token instead, give it in the entry\'s "headers"'
            )
        elif self._unauthorized or answered_401(exc):
            why = SIGN_IN_NEEDED if uses_oauth(self.entry) else TOKEN_REFUSED
        elif timed_out:
            waited = (self.entry.timeout or CHECK_TIMEOUT_S) if self._connected else None
            why = f"it did not answer in {waited or self._start_timeout_s:g} s"
        else:
            why = describe_error(exc)
        if timed_out and not self._connected and self.entry.sandbox and not self.entry.network:
            why += ' (it has no network: one that downloads, npx or uvx, needs "network": true)'
        tail = stderr_tail(errlog)
        if tail:
            why += f"; its stderr: {tail}"
        elif timed_out:
            why += "; nothing on its stderr"
        # It goes to logs, doctor and tool.failed events: no URL password nor query value,
        # nor what a ${VAR} of the entry gave.
        return redact_text(why)

    @property
    def _start_timeout_s(self) -> float:
        """For initialize and each listing: the entry's "timeout", else START_TIMEOUT_S."""
        return self.entry.timeout or START_TIMEOUT_S

    async def _refresh(self, client: Client, *, force: bool = False) -> None:
        """List the tools (every page) and put them in the registry if they changed (or
        ``force``: the resources did, which the read_resource tool describes)."""
        found = await _all_pages(client.list_tools, "tools")
        listed = tuple(
            (t.name, repr((t.description, t.input_schema, t.annotations))) for t in found
        )
        if listed == self._listed and not force:
            return
        self._listed = listed
        tools: dict[str, Tool] = {}
        # Never offered, so never callable: the registry knows only what is offered.
        self._dropped = tuple(t.name for t in found if not self.entry.offers(t.name))
        for info in found:
            if not self.entry.offers(info.name):
                continue
            name = tool_name(self.server, info.name)
            if name in tools:
                log.warning("mcp.tool_name_clash", server=self.server, tool=info.name, name=name)
                continue
            tools[name] = adapt(
                info,
                name=name,
                caller=self,
                approval=self.entry.approval,
                timeout_s=self.timeout_s,
            )
        reader = ReadResourceTool(self, self.resources, self.entry.approval)
        # The entry's "tools" filter covers it as "read_resource"; the server's own
        # tool of that name wins.
        offered = self.entry.offers("read_resource")
        if offered and not self.resources.empty and reader.name not in tools:
            tools[reader.name] = reader
        self.registry.set_external(self.source, tools.values(), profiles=self.entry.profiles)

    async def _list_offers(self, client: Client) -> None:
        """The server's resources, resource templates and prompts (when it has them). A
        server that refuses a listing it announced keeps its tools: only that is missing."""
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        try:
            await self._list_offers_of(client)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise
            log.warning("mcp.listing_refused", server=self.server, error=redact_text(str(exc)))

    async def _list_offers_of(self, client: Client) -> None:
        caps = client.server_capabilities
        if caps.resources is not None:
            resources = await _all_pages(client.list_resources, "resources")
            templates = await _all_pages(client.list_resource_templates, "resource_templates")
            self.resources.update(resources, templates)
        if caps.prompts is not None:
            prompts = await _all_pages(client.list_prompts, "prompts")
            self._prompts = tuple(p.name for p in prompts)
            self.prompt_list = prompt_infos(self.server, prompts)

    async def _note_status(self, response: Any) -> None:
        self._unauthorized = response.status_code == 401

    def _kept_sign_in(self) -> bool:
        assert self.oauth is not None
        return token_file(self.oauth.folder, self.server).exists()

    def _sign_in_now(self, exc: BaseException) -> bool:
        """After a 401 from a connection without the OAuth provider: the next one has it."""
        if self.oauth is None or self._signs_in:
            return False
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        if not (self._unauthorized or answered_401(exc)):
            return False
        self._signs_in = True
        return True

    def _waiting_for_sign_in(self, waiting: bool) -> None:
        """The SDK's sign-in waits for the user (True), or the user is back (False)."""
        if waiting:
            self.state, self.error = "needs-sign-in", WAITING_FOR_SIGN_IN
            assert self.oauth is not None
            # The link to Navi's route, never the authorization URL (it holds the state).
            log.info(
                "mcp.sign_in_needed", server=self.server, link=self.oauth.sign_in_link(self.server)
            )
            self.first_attempt.set()
        else:
            self.state, self.error = "starting", ""
            log.info("mcp.signed_in", server=self.server)

    # ------------------------------------------------------------------ calls

    async def call_tool(
        self, name: str, arguments: dict[str, Any], messages: CallMessages | None = None
    ) -> CallToolResult:
        """Call a tool; what the server says meanwhile (progress, log lines) goes into
        ``messages``, and the resource links of its result become readable."""
        from mcp_types import ResourceLink

        messages = messages or CallMessages()
        self.notices.calls.append(messages)
        try:
            # The registry's time limit and the run's stop cancel this await; the SDK
            # then sends notifications/cancelled so the server stops working too.
            result = await self._request(
                lambda c: c.call_tool(
                    name,
                    arguments,
                    read_timeout_seconds=self.timeout_s + CALL_TIMEOUT_SLACK_S,
                    progress_callback=messages.progress,
                ),
            )
        finally:
            self.notices.calls.remove(messages)
        for block in result.content:
            if isinstance(block, ResourceLink):
                self.resources.saw_link(str(block.uri))
        return cast("CallToolResult", result)

    async def read_resource(self, uri: str) -> ReadResourceResult:
        return cast("ReadResourceResult", await self._request(lambda c: c.read_resource(uri)))

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> GetPromptResult:
        """One of the server's prompts, filled in (for a client's prompt menu)."""
        return cast("GetPromptResult", await self._request(lambda c: c.get_prompt(name, arguments)))

    async def _request(self, send: Any) -> Any:
        """``send(client)``'s answer; a refusal is the server's, a broken connection is
        restarted."""
        client = self._client
        if client is None:
            raise ServerDown(self._down_message())
        try:
            return await send(client)
        except Exception as exc:
            from mcp import MCPError
            from mcp_types import CONNECTION_CLOSED

            if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED:
                raise ToolError(
                    f"the MCP server '{self.server}' refused the call: "
                    + redact_text(exc.error.message)
                ) from None
            self.notices.wake.set()
            raise ServerDown(
                f"the MCP server '{self.server}' failed during the call "
                f"({redact_text(describe_error(exc))}); "
                "Navi is restarting it"
            ) from None

    def _down_message(self) -> str:
        why = f" ({self.error})" if self.error else ""
        return f"the MCP server '{self.server}' is not running{why}; Navi is restarting it"


def _oauth_error(exc: BaseException) -> bool:
    from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return isinstance(exc, (OAuthFlowError, OAuthRegistrationError, OAuthTokenError))


async def _all_pages(list_page: Any, field: str) -> list[Any]:
    """Every item of a paginated listing (at most ``PAGES_MAX`` pages)."""
    found: list[Any] = []
    cursor: str | None = None
    for _ in range(PAGES_MAX):
        page = await list_page(cursor=cursor)
        found.extend(getattr(page, field))
        cursor = page.next_cursor
        if cursor is None:
            break
    return found
