"""SSRF guard for the crawler: URLs that come from search results are not trusted.

A URL passes only when its scheme is http(s) and every address its host resolves to is public
(not loopback, private, link-local, shared, multicast, reserved or unspecified). An IPv6 address that
carries an IPv4 address (IPv4-mapped, IPv4-compatible, 6to4, NAT64, Teredo) is refused when the IPv4
address is not public: `[2002:7f00:1::]` reaches 127.0.0.1 through a 6to4 relay. The crawler then
connects to one of exactly those addresses (the connection is pinned, so a DNS answer cannot change
between the check and the request), and runs the check again on every redirect.

Operators (and tests) can trust specific private origins (`trusted_origins`, "host:port") or, for
tests only, every private host (`allow_private_hosts`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

import httpx

from research_tool.core.errors import FetchRefusedError, ProviderResponseError

Resolver = Callable[[str, int], Awaitable[list[str]]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOWED_SCHEMES = frozenset({"http", "https"})
PROVIDER = "crawler"


async def system_resolver(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


_NAT64_PREFIXES = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries and may reach: IPv4-mapped (::ffff:a.b.c.d),
    IPv4-compatible (::a.b.c.d), 6to4 (2002:AABB:CCDD::/48), NAT64 (64:ff9b::/96 and the local-use
    64:ff9b:1::/48, address in the last 32 bits) and Teredo (2001::/32: its server and its client)."""
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if any(address in prefix for prefix in _NAT64_PREFIXES):
        found.append(low32)
    if address in _IPV4_COMPATIBLE and int(address) > 1:  # not :: and ::1 (judged as IPv6 below)
        found.append(low32)
    return found


def is_public_address(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        embedded = embedded_ipv4(address)
        if any(not is_public_address(inner) for inner in embedded):
            return False
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
    blocked = (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )
    return address.is_global and not blocked


@dataclass(frozen=True)
class CheckedTarget:
    url: httpx.URL
    host: str
    port: int
    address: str  # the address the request must go to

    def pinned_url(self) -> httpx.URL:
        """The URL with its host replaced by the checked address (Host header and SNI keep the name)."""
        return self.url.copy_with(host=self.address)


class UrlGuard:
    def __init__(
        self,
        *,
        resolver: Resolver | None = None,
        allow_private_hosts: bool = False,
        trusted_origins: Collection[str] = (),
    ) -> None:
        self.resolver = resolver or system_resolver
        self.allow_private_hosts = allow_private_hosts
        self.trusted_origins = frozenset(o.lower() for o in trusted_origins)

    def _trusted(self, host: str, port: int) -> bool:
        return self.allow_private_hosts or f"{host}:{port}" in self.trusted_origins

    async def check(self, raw_url: str) -> CheckedTarget:
        """The target to connect to; raises FetchRefusedError for a URL the crawler must not fetch."""
        try:
            url = httpx.URL(raw_url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise FetchRefusedError(PROVIDER, f"invalid URL: {exc}", url=raw_url) from exc
        if url.scheme not in ALLOWED_SCHEMES:
            raise FetchRefusedError(PROVIDER, f"scheme '{url.scheme}' is not http(s)", url=raw_url)
        host = url.host.lower().rstrip(".")
        if not host:
            raise FetchRefusedError(PROVIDER, "URL has no host", url=raw_url)
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            literal: IPAddress | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            addresses = [str(literal)]
        else:
            try:
                addresses = await self.resolver(host, port)
            except (OSError, UnicodeError) as exc:
                raise ProviderResponseError(PROVIDER, f"cannot resolve '{host}': {exc}", url=raw_url) from exc
            if not addresses:
                raise ProviderResponseError(PROVIDER, f"'{host}' resolves to no address", url=raw_url)
        if not self._trusted(host, port):
            for address in addresses:
                if not is_public_address(ipaddress.ip_address(address.split("%")[0])):
                    raise FetchRefusedError(PROVIDER, f"'{host}' resolves to non-public address {address}", url=raw_url)
        return CheckedTarget(url=url, host=host, port=port, address=addresses[0])
