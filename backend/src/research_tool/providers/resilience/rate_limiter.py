"""Per-provider request spacing and in-flight bound, shared by every session in the process (DESIGN §4).

Each provider (and each crawled host) has one `RateLimiter` that lets requests through no closer
than `1 / rate` seconds apart, in arrival order, and can be paused by anyone: a 429 with
`Retry-After` (or `X-RateLimit-Reset`) or PubMed's rate-limit body pauses the bucket for every
caller in the process.

Why not aiolimiter: its leaky bucket has no way to hold the bucket for a server-given pause, and its
capacity lets a burst of `max_rate` requests through at once, while the providers' documented limits
(arXiv one request per 3 s, Semantic Scholar 1/s) ask for even spacing. This is ~40 lines.

`slot()` is the gate every provider request passes before it reaches the shared httpx client: at most
`max_in_flight` requests per endpoint are past it, so requests that have to wait, wait here (an
asyncio.Semaphore: one deque entry each, woken one at a time) and not in httpx's connection pool, whose
bookkeeping walks every queued request on each change and, with hundreds queued, ran on the event loop
for most of its time. The client's pool is sized so that what passes the gates never waits in it
(`http_client.pool_limits`).

Across processes (RESEARCH_REDIS_URL): the registry hands every limiter a `SharedLimits`; a request then also
needs its turn in the cluster-wide spacing kept in Redis, and a pause is written there for every process
(shared_limits.py). The in-process spacing and pause still hold first (they cost nothing and are the fallback
while Redis is down); the in-flight gate stays per process.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from research_tool.core import telemetry
from research_tool.core.errors import SharedLimitsUnavailableError
from research_tool.core.logging import get_logger
from research_tool.providers.resilience.circuit_breaker import refuse_if_opened

if TYPE_CHECKING:
    from research_tool.providers.base import SearchProvider
    from research_tool.providers.resilience.shared_limits import SharedLimits

log = get_logger(__name__)

# Longest pause a server's header may impose on us (a monthly-quota reset must not freeze a session).
MAX_PAUSE_S = 600.0
# A caller waiting for its turn looks at its provider's breaker this often (an open breaker ends the wait).
BREAKER_CHECK_S = 0.1
# A request is sent a moment after it is granted; a busy event loop can delay one send more than the next
# and bring two arrivals closer than the interval. A little slack on each interval absorbs that.
SPACING_MARGIN_FRACTION = 0.02
SPACING_MARGIN_MAX_S = 0.010
# Across processes the grant-to-send delays differ more (each process's event loop has its own load: measured
# 38 ms apart on a busy 2-core machine), so cluster-wide grants keep a wider margin.
CLUSTER_SPACING_MARGIN_FRACTION = 0.05
CLUSTER_SPACING_MARGIN_MAX_S = 0.050
# Requests of one provider endpoint past its gate at once (RESEARCH_PROVIDER_MAX_IN_FLIGHT sets the process's).
DEFAULT_MAX_IN_FLIGHT = 256
# A wait for the rate limiter's turn at least this long is an event on the caller's span (tracing on)
RATE_WAIT_EVENT_S = 0.001


class RateLimiter:
    """Even spacing of `rate` requests per second, with a shared pause."""

    def __init__(self, name: str, rate: float, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT) -> None:
        self.name = name
        self._interval = 0.0
        self._cluster_interval = 0.0
        self.set_rate(rate)
        self.max_in_flight = max(1, max_in_flight)
        self._last_start = float("-inf")
        self._paused_until = float("-inf")
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._gates: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
        self._guard = threading.Lock()
        self.in_flight = 0
        # the cluster-wide spacing and pauses (None: this process alone), set by the registry
        self.shared: SharedLimits | None = None
        # Redis's clock (epoch seconds) at this process's latest cluster-wide grant (None before one)
        self.cluster_granted_at: float | None = None

    @property
    def interval(self) -> float:
        return self._interval

    def set_rate(self, rate: float) -> None:
        """`rate` requests per second; 0 or less means unlimited."""
        interval = 1.0 / rate if rate > 0 else 0.0
        self._interval = interval + min(SPACING_MARGIN_FRACTION * interval, SPACING_MARGIN_MAX_S)
        self._cluster_interval = interval + min(
            CLUSTER_SPACING_MARGIN_FRACTION * interval, CLUSTER_SPACING_MARGIN_MAX_S
        )

    @property
    def cluster_interval(self) -> float:
        """Spacing of the cluster-wide grants (RESEARCH_REDIS_URL): the interval with the wider margin."""
        return self._cluster_interval

    @property
    def last_granted_at(self) -> float:
        """time.monotonic() value of the latest grant (-inf before the first)."""
        return self._last_start

    @property
    def paused_until(self) -> float:
        """time.monotonic() value before which no request starts (-inf when not paused)."""
        return self._paused_until

    def pause(self, seconds: float, *, reason: str = "rate_limited") -> None:
        """Hold every caller's next request for `seconds` (capped at MAX_PAUSE_S)."""
        seconds = min(max(seconds, 0.0), MAX_PAUSE_S)
        if self._hold_until(time.monotonic() + seconds):
            log.info("rate_limiter_paused", limiter=self.name, seconds=round(seconds, 3), reason=reason)
        shared = self.shared
        if shared is not None and shared.available:
            shared.in_background(shared.pause(self.name, seconds), "pause")

    def _hold_until(self, until: float) -> bool:
        if until <= self._paused_until:
            return False
        self._paused_until = until
        return True

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        with self._guard:
            lock = self._locks.get(loop)
            if lock is None:
                # one process normally runs one loop; tests run many, each gets its own lock
                self._locks = {lp: lk for lp, lk in self._locks.items() if not lp.is_closed()}
                lock = self._locks[loop] = asyncio.Lock()
            return lock

    def _gate(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._guard:
            gate = self._gates.get(loop)
            if gate is None:
                self._gates = {lp: g for lp, g in self._gates.items() if not lp.is_closed()}
                gate = self._gates[loop] = asyncio.Semaphore(self.max_in_flight)
            return gate

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Wait for one of the endpoint's `max_in_flight` places, then for the request's turn in the spacing;
        hold the place until the response is read (the body block ends)."""
        async with self._gate():
            await self.acquire()
            self.in_flight += 1
            try:
                yield
            finally:
                self.in_flight -= 1

    async def acquire(self) -> None:
        """Wait for this caller's turn. Callers bound it with their deadline (asyncio.timeout_at). With tracing on,
        a wait is an event (`rate_limit.wait`) on the current span: the provider call's or the page fetch's."""
        if not telemetry.enabled():
            await self._wait_turn()
            return
        started = time.monotonic()
        await self._wait_turn()
        waited = time.monotonic() - started
        if waited >= RATE_WAIT_EVENT_S:
            telemetry.current().event(
                "rate_limit.wait", {"research.rate_limiter": self.name, "research.wait_s": round(waited, 4)}
            )

    async def _wait_turn(self) -> None:
        async with self._lock():
            while True:
                refuse_if_opened()  # a provider call whose breaker opened while it waited goes no further
                now = time.monotonic()
                ready_at = max(self._last_start + self._interval, self._paused_until)
                if ready_at <= now:
                    wait = await self._cluster_wait()
                    if wait <= 0.0:
                        self._last_start = time.monotonic()
                        return
                    ready_at = now + wait
                # re-checked after the sleep (in steps, for the breaker): a pause may have arrived meanwhile
                await asyncio.sleep(min(ready_at - now, BREAKER_CHECK_S))

    async def _cluster_wait(self) -> float:
        """0 when the cluster-wide spacing grants this process its turn now (or there is no cluster, or Redis is
        down: the in-process spacing then decides alone); else the seconds to wait before asking again."""
        shared = self.shared
        if shared is None or not shared.available:
            return 0.0
        try:
            reply = await shared.take_turn(self.name, self._cluster_interval)
        except SharedLimitsUnavailableError:
            return 0.0
        if reply.paused_for_s > 0:
            # another process's 429: the gateway's "paused past the deadline" check sees it too
            self._hold_until(time.monotonic() + reply.paused_for_s)
        if not reply.granted:
            return reply.wait_s
        self.cluster_granted_at = reply.redis_time
        return 0.0


class RateLimiterRegistry:
    """One limiter per key (a provider name, or `crawler:<host>`)."""

    def __init__(self) -> None:
        self._limiters: dict[str, RateLimiter] = {}
        self._guard = threading.Lock()
        self.max_in_flight = DEFAULT_MAX_IN_FLIGHT  # for limiters created from now on
        self.shared: SharedLimits | None = None

    def share_through(self, shared: SharedLimits | None) -> None:
        """Every limiter, existing and future, keeps its spacing with all processes through `shared`
        (None: this process alone again)."""
        with self._guard:
            self.shared = shared
            for limiter in self._limiters.values():
                limiter.shared = shared

    def get(self, key: str, rate: float) -> RateLimiter:
        """The limiter for `key`, created on first use; its rate follows the latest configuration."""
        with self._guard:
            limiter = self._limiters.get(key)
            if limiter is None:
                limiter = self._limiters[key] = RateLimiter(key, rate, self.max_in_flight)
                limiter.shared = self.shared
            else:
                limiter.set_rate(rate)
            return limiter

    def clear(self) -> None:
        """Forget every limiter and the cluster link (a fresh registry, as tests start)."""
        with self._guard:
            self._limiters.clear()
            self.shared = None


# The process-wide registry every provider, the gateway and the crawler use.
RATE_LIMITERS = RateLimiterRegistry()


def get_rate_limiter(key: str, rate: float) -> RateLimiter:
    return RATE_LIMITERS.get(key, rate)


def endpoint_key(name: str, base_url: str) -> str:
    """Limiters and breakers belong to a provider *endpoint*: the same provider behind another base URL
    (a self-hosted proxy, a test server) is another service with its own budget and health."""
    return f"{name}@{base_url}"


def provider_limiter(provider: SearchProvider) -> RateLimiter:
    """The process-wide limiter of `provider`'s endpoint, at its configured rate."""
    return get_rate_limiter(endpoint_key(provider.name, provider.base_url), provider.requests_per_second)
