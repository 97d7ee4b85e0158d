"""Which addresses a tool may connect to, checked where the connection is opened.

A tool's URL comes from the LLM, which reads hostile pages, so it is never trusted:
the host is resolved once, every address is checked against an :class:`OutboundPolicy`,
and the socket is opened to the address that passed (the Host header and TLS SNI keep
the name). A DNS answer that changes between a check and the connection (rebinding)
therefore cannot slip through; ``tools.fetch`` follows redirects hop by hop, and every
hop connects through here again.

Never reachable: cloud-metadata addresses, link-local addresses, and Navi's own
listening port on any address of this machine. Reachable only when the operator sets
``NAVI_ALLOW_PRIVATE_URLS=1``: this machine's addresses, loopback (and ``0.0.0.0``,
which reaches it) and its interfaces' own (a public one included). Reachable
when the profile allows LAN access (``allow_private_urls``) and the session's account
has the ``lan`` grant (navi/grants.py), or the operator does:
private, shared (CGNAT), reserved and multicast ranges. Everything else is public.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import anyio
import httpcore

from tools.base import ToolError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle, Hetzner
        "169.254.170.2",  # AWS ECS task credentials
        "fd00:ec2::254",  # AWS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud Classic
    )
)
METADATA_NAMES = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data.ec2.internal"}
)
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")  # connecting to 0.x reaches this host
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

_LAN_HINT = (
    "this call has no LAN access (it needs a profile with allow_private_urls and the "
    "account's 'lan' grant, or the operator's NAVI_ALLOW_PRIVATE_URLS=1)"
)


class OutboundRefused(ToolError):
    """A connection the policy does not allow; the message says what and why."""


@dataclass(frozen=True, kw_only=True)
class OutboundPolicy:
    # Private, shared, reserved and multicast ranges: the profile's LAN grant or the operator.
    allow_private: bool = False
    # This machine's own services (loopback): the operator only (NAVI_ALLOW_PRIVATE_URLS).
    allow_loopback: bool = False
    # Navi's own listening port: refused on every address of this machine, always.
    navi_port: int | None = None

    def refusal(self, address: IPAddress, port: int) -> str | None:
        """Why a connection to ``address:port`` is refused, or None if it is allowed."""
        plain = _embedded_ipv4(address)
        if address in METADATA_ADDRESSES or plain in METADATA_ADDRESSES:
            return "a cloud metadata address, never reachable from tools"
        if plain.is_link_local:
            return "a link-local address, never reachable from tools"
        if _is_this_machine(plain):
            # Loopback, or an interface's own address: the same services either way (one
            # bound to 0.0.0.0 answers on both), so the same rule.
            if port == self.navi_port:
                return "Navi's own address, never reachable from tools"
            if self.allow_loopback:
                return None
            return (
                "an address of this machine (loopback or one of its interfaces); only the "
                "operator can open those, with NAVI_ALLOW_PRIVATE_URLS=1"
            )
        public = plain.is_global and not plain.is_multicast and not plain.is_reserved
        if public or self.allow_private:
            return None
        return f"a private-network address, and {_LAN_HINT}"

    def check_name(self, host: str) -> None:
        name = host.lower().rstrip(".")
        if name in METADATA_NAMES:
            raise OutboundRefused(
                f"refused to connect to {host}: it is a cloud metadata service, never "
                "reachable from tools"
            )


def _embedded_ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one carries (mapped ``::ffff:a.b.c.d``, NAT64, 6to4):
    a connection to it reaches that IPv4 host, so it is checked as that host."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def _is_this_machine(address: IPAddress) -> bool:
    """Whether ``address`` belongs to this machine: loopback, or one a socket can bind to
    (only a local interface's address can be bound)."""
    if address.is_loopback or address.is_unspecified or address in _THIS_NETWORK:
        return True
    if address.is_multicast:  # a socket binds to a group to receive it, on any machine
        return False
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((str(address), 0))
    except OSError:
        return False
    return True


async def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses ``host`` names: itself if it is an IP literal, else from DNS."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from None
    addresses: list[IPAddress] = []
    for family, _, _, _, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6):
            address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
            if address not in addresses:
                addresses.append(address)
    return addresses


class CheckedNetworkBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network layer with the policy in ``connect_tcp``: resolve once, check,
    connect to the checked address. ``connected`` lists (host, address, port) of every
    connection opened, for logs and tests."""

    def __init__(
        self,
        policy: OutboundPolicy,
        *,
        resolver: Resolver = resolve,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.policy = policy
        self._resolve = resolver
        self._inner = inner or httpcore.AnyIOBackend()
        self.connected: list[tuple[str, str, int]] = []

    async def allowed_addresses(self, host: str, port: int) -> list[IPAddress]:
        """The addresses of ``host`` the policy allows; refused if there are none."""
        self.policy.check_name(host)
        addresses = await self._resolve(host, port)
        if not addresses:
            raise httpcore.ConnectError(f"{host} has no address")
        allowed = [a for a in addresses if self.policy.refusal(a, port) is None]
        if not allowed:
            first = addresses[0]
            reason = self.policy.refusal(first, port)
            shown = host if host == str(first) else f"{host} ({first})"
            raise OutboundRefused(f"refused to connect to {shown}: it is {reason}")
        return allowed

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self.allowed_addresses(host, port)
        for index, address in enumerate(addresses):
            try:
                stream = await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore.ConnectError:
                if index == len(addresses) - 1:
                    raise
                continue  # e.g. an IPv6 address on a host without IPv6: try the next
            self.connected.append((host, str(address), port))
            return stream
        raise AssertionError("unreachable: the loop returns or raises")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise OutboundRefused("tools may not connect to Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)
