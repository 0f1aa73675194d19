"""Each tenant's share of an API process, without IO: a rate (token bucket), requests in
flight, the body bytes held, and whether a tenant is over an equal share of the recent load
(the one a lagging loop sheds first). The tenant is the API key's; open mode is one tenant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

OPEN = "-"  # the one tenant of open mode: no key says who sent a request
OTHER = "other"  # the metrics' label for tenants past the first ``MAX_LABELS``
MAX_LABELS = 100
WINDOW_SECONDS = 1.0  # the recent load counts this window and the one before
# While the loop lags, the tenants sending the most keep this fraction of their requests in
# flight: CPU the others need is not held by requests that can only wait for it.
SQUEEZE = 4


class TokenBucket:
    """``rate`` tokens a second up to ``capacity``; a request takes one."""

    __slots__ = ("capacity", "rate", "stamp", "tokens")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.stamp = now

    def take(self, now: float) -> float:
        """0 with a token taken, else the seconds until one is there (none taken)."""
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = max(self.stamp, now)
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


@dataclass(frozen=True)
class Policy:
    """The shares: defaults, per-tenant overrides (0: no limit of the tenant's own)."""

    max_in_flight: int = 0
    rate: float = 0.0
    max_body_bytes: int = 0  # per tenant
    in_flight_overrides: dict[str, int] = field(default_factory=dict)
    rate_overrides: dict[str, float] = field(default_factory=dict)

    def in_flight_of(self, tenant: str) -> int:
        return self.in_flight_overrides.get(tenant, self.max_in_flight)

    def rate_of(self, tenant: str) -> float:
        return self.rate_overrides.get(tenant, self.rate)


class _Tenant:
    __slots__ = ("body_bytes", "bucket", "in_flight", "label", "previous", "recent", "window")

    def __init__(self, label: str) -> None:
        self.label = label
        self.in_flight = 0
        self.body_bytes = 0
        self.bucket: TokenBucket | None = None
        self.window = -1  # the window ``recent`` counts in
        self.recent = 0
        self.previous = 0  # the window before


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: 429 for the tenant's share, 503 for the process's."""

    status: int
    reason: str  # the metrics' outcome
    retry_after: int
    message: str


class Tenants:
    """Every tenant's use of one process; tenants are kept once seen (API keys bound them)."""

    def __init__(self, policy: Policy, *, max_body_bytes: int) -> None:
        self.policy = policy
        self.max_body_bytes = max_body_bytes  # the process's
        self.body_bytes = 0
        self._tenants: dict[str, _Tenant] = {}

    def get(self, tenant: str) -> _Tenant:
        state = self._tenants.get(tenant)
        if state is None:
            label = tenant if len(self._tenants) < MAX_LABELS else OTHER
            state = self._tenants[tenant] = _Tenant(label)
        return state

    def label(self, tenant: str) -> str:
        return self.get(tenant).label

    def hold_bytes(self, tenant: str, size: int) -> Refusal | None:
        """Hold ``size`` body bytes for the tenant (give them back with ``free_bytes``)."""
        state = self.get(tenant)
        own = self.policy.max_body_bytes
        if own and state.body_bytes + size > own:
            return Refusal(
                429, "body_bytes", 1, f"this tenant has {own} bytes of request bodies in flight"
            )
        if self.body_bytes + size > self.max_body_bytes:
            return Refusal(503, "body_bytes", 1, "the server holds too many request bodies")
        state.body_bytes += size
        self.body_bytes += size
        return None

    def free_bytes(self, tenant: str, size: int) -> None:
        self.get(tenant).body_bytes -= size
        self.body_bytes -= size

    def enter(self, tenant: str, now: float, *, squeezed: bool = False) -> Refusal | None:
        """Count a request in (``leave`` when done) unless the tenant is over its rate or its
        requests in flight (a ``SQUEEZE``th of them when ``squeezed``: the loop lags and the
        tenant sends the most); one refused for its rate costs no token."""
        state = self.get(tenant)
        limit = self.policy.in_flight_of(tenant)
        if squeezed and limit:
            limit = max(1, limit // SQUEEZE)
        if limit and state.in_flight >= limit:
            return Refusal(
                429, "in_flight", 1, f"this tenant has {limit} requests in flight, its share"
            )
        rate = self.policy.rate_of(tenant)
        if rate:
            if state.bucket is None:
                state.bucket = TokenBucket(rate, max(1.0, rate * WINDOW_SECONDS), now)
            wait = state.bucket.take(now)
            if wait:
                return Refusal(
                    429, "rate", max(1, math.ceil(wait)), f"this tenant's share is {rate:g} req/s"
                )
        state.in_flight += 1
        self._count(state, now)
        return None

    def leave(self, tenant: str) -> None:
        self.get(tenant).in_flight -= 1

    def in_flight(self, tenant: str) -> int:
        return self.get(tenant).in_flight

    def over_equal_share(self, tenant: str, now: float) -> bool:
        """Whether the tenant sent at least an equal share of the recent requests: with one
        tenant alone, always; beside a busier one, not."""
        window = math.floor(now / WINDOW_SECONDS)
        total = active = 0
        for state in self._tenants.values():
            recent = _recent(state, window)
            total += recent
            active += recent > 0
        mine = _recent(self.get(tenant), window)
        return active == 0 or mine * active >= total  # nobody else sent: alone

    def _count(self, state: _Tenant, now: float) -> None:
        window = math.floor(now / WINDOW_SECONDS)
        if window != state.window:
            state.previous = state.recent if window == state.window + 1 else 0
            state.recent = 0
            state.window = window
        state.recent += 1


def _recent(state: _Tenant, window: int) -> int:
    """The tenant's requests in this window and the one before, as seen from ``window``."""
    if state.window == window:
        return state.recent + state.previous
    if state.window == window - 1:
        return state.recent
    return 0
