"""Which ``Host`` headers the API answers, against DNS rebinding.

A web page a developer visits can point its own name at 127.0.0.1 and then read the API
from the developer's browser as if it were the page's own origin. In open mode (no API
keys) that is every tenant's data, so only loopback names are answered there: ``localhost``,
``127.0.0.0/8`` and ``[::1]``, on any port. ``MEMSTREAM_API_ALLOWED_HOSTS`` replaces that
list (behind a proxy, or with keys as well); with keys and no list, any host is answered.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

HostCheck = Callable[[str], bool]


def host_name(header: str) -> str:
    """The host of a ``Host`` header, without its port, lower case: ``[::1]:8080`` -> ``::1``."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    name, sep, port = value.rpartition(":")
    if sep and port.isdigit() and ":" not in name:
        value = name
    return value.rstrip(".")


def loopback(host: str) -> bool:
    """``localhost``, or an address of 127.0.0.0/8 or ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve to anything


def parse_allowed(raw: str) -> frozenset[str]:
    """``MEMSTREAM_API_ALLOWED_HOSTS``: host names (ports ignored), separated by commas."""
    return frozenset(host_name(part) for part in raw.split(",") if part.strip())


def host_check(allowed: frozenset[str], open_mode: bool) -> HostCheck | None:
    """The test a request's host must pass, or None when any host will do."""
    if "*" in allowed:
        return None
    if allowed:
        return lambda host: host in allowed
    if open_mode:
        return loopback
    return None
