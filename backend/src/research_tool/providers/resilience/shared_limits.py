"""Provider rate limits and circuit breakers shared by every process of a cluster, through Redis.

With RESEARCH_REDIS_URL set, each `RateLimiter` and `CircuitBreaker` of the process-wide registries asks Redis
before it decides (the registries hand them this object); unset, they decide alone, as always.

Why two small Lua scripts on redis-py and not a library: the providers' documented limits ask for EVEN SPACING
(arXiv one request per 3 s, Semantic Scholar 1/s) and a pause that a 429's Retry-After imposes on everyone.
`limits` and `pyrate-limiter` count "N per window" (a window of N lets N through at once, and neither can hold the
bucket for a server-given pause), and they stamp hits with each process's own clock. `purgatory`'s Redis storage
reads and writes the breaker state in separate commands (two processes can both take the half-open probe; it lets
every caller through when half-open, not one) and also uses each process's clock. Each script here is one atomic
step on one hash, timed by Redis's own clock (`TIME`), so processes on different machines agree:

- spacing (GCRA's "virtual scheduling" without the queue): grant when `now >= max(next, paused_until)` and set
  `next = now + interval`; otherwise answer how long to wait. A caller that must wait sleeps and asks again (one
  caller per process asks at a time: the limiter's local lock keeps the others in FIFO order), so a pause that
  arrives meanwhile holds requests that were not yet granted: no reservation is handed out ahead of time.
- breaker: consecutive failures, open, half-open with ONE probe for the whole cluster. The probe holds a lease
  (PROBE_LEASE_S), so a process killed mid-probe does not keep the breaker half-open forever.

Redis down: a call that fails or takes longer than CALL_TIMEOUT_S raises SharedLimitsUnavailableError; callers
then use their in-process limiter and breaker (never "no limit"). One warning is logged per outage, and Redis is
tried again after RETRY_AFTER_S.

redis-py is imported by whoever builds this object (runtime/composition.py), so this module (and the package)
imports without the `redis` extra.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from research_tool.core.errors import SharedLimitsUnavailableError
from research_tool.core.logging import get_logger

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = get_logger(__name__)

# One Redis round trip may take this long before the caller falls back to its own limits. Not less: a worker busy
# with sessions' CPU work can leave its event loop a second behind, and a reply read that late is not an outage
# (at 0.5 s, loaded workers fell back to their own limits and broke the cluster's spacing: make bench, cluster).
CALL_TIMEOUT_S = 2.0
# After a failed call, Redis is not asked again for this long (every caller uses its own limits meanwhile).
RETRY_AFTER_S = 5.0
# A half-open probe that never reports back (its process was killed) frees the probe after this long.
PROBE_LEASE_S = 60.0
# Breaker hashes not touched for this long are dropped by Redis (a closed breaker with no failures).
BREAKER_KEY_TTL_MS = 24 * 3600 * 1000
# Spacing hashes outlive their `next` / `paused_until` by this long.
SPACING_KEY_SLACK_MS = 60_000
MICROS = 1_000_000

# KEYS[1]: the limiter's hash. ARGV[1]: interval (µs), ARGV[2]: key slack (ms).
# Returns {granted (0/1), wait (µs), paused for (µs), Redis's time now (µs since the epoch)}.
SPACING_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local h = redis.call('HMGET', KEYS[1], 'next', 'paused_until')
local nxt = tonumber(h[1] or '0')
local paused = tonumber(h[2] or '0')
local paused_for = math.max(paused - now, 0)
local ready = math.max(nxt, paused)
if ready > now then
  return {0, ready - now, paused_for, now}
end
nxt = now + tonumber(ARGV[1])
redis.call('HSET', KEYS[1], 'next', nxt)
redis.call('PEXPIRE', KEYS[1], math.ceil((math.max(nxt, paused) - now) / 1000) + tonumber(ARGV[2]))
return {1, 0, paused_for, now}
"""

# KEYS[1]: the limiter's hash. ARGV[1]: pause (µs), ARGV[2]: key slack (ms). Returns the pause left (µs).
PAUSE_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local h = redis.call('HMGET', KEYS[1], 'next', 'paused_until')
local nxt = tonumber(h[1] or '0')
local paused = math.max(tonumber(h[2] or '0'), now + tonumber(ARGV[1]))
redis.call('HSET', KEYS[1], 'paused_until', paused)
redis.call('PEXPIRE', KEYS[1], math.ceil((math.max(nxt, paused) - now) / 1000) + tonumber(ARGV[2]))
return paused - now
"""

# KEYS[1]: the breaker's hash. ARGV: op (admit|failure|success|release), threshold, reset timeout (µs),
# probe lease (µs), key ttl (ms). Returns {allowed (0/1), state, consecutive failures, retry in (µs)}.
BREAKER_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local op = ARGV[1]
local threshold = tonumber(ARGV[2])
local reset = tonumber(ARGV[3])
local h = redis.call('HMGET', KEYS[1], 'state', 'failures', 'opened_at', 'probe_until')
local state = h[1] or 'closed'
local failures = tonumber(h[2] or '0')
local opened_at = tonumber(h[3] or '0')
local probe_until = tonumber(h[4] or '0')
if state == 'open' and now - opened_at >= reset then
  state = 'half_open'
  probe_until = 0
end
local allowed = 0
if op == 'admit' then
  if state == 'closed' then
    allowed = 1
  elseif state == 'half_open' and probe_until <= now then
    probe_until = now + tonumber(ARGV[4])
    allowed = 1
  end
elseif op == 'failure' then
  failures = failures + 1
  if state == 'half_open' or failures >= threshold then
    state = 'open'
    opened_at = now
    probe_until = 0
  end
elseif op == 'success' then
  state = 'closed'
  failures = 0
  probe_until = 0
elseif op == 'release' then
  probe_until = 0
end
redis.call('HSET', KEYS[1], 'state', state, 'failures', failures, 'opened_at', opened_at, 'probe_until', probe_until)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[5]))
local retry_in = 0
if state == 'open' then
  retry_in = math.max(opened_at + reset - now, 0)
end
return {allowed, state, failures, retry_in}
"""


class LuaScript(Protocol):
    """redis-py's registered script (`AsyncScript`): EVALSHA, falling back to EVAL when Redis lost it."""

    def __call__(self, keys: Sequence[str] | None = ..., args: Sequence[Any] | None = ...) -> Awaitable[Any]: ...


@dataclass(frozen=True)
class SpacingReply:
    granted: bool
    wait_s: float  # when not granted: until the next request may start
    paused_for_s: float  # what is left of a pause set by any process
    redis_time: float  # Redis's clock when it answered (epoch seconds): the grant's time when granted


@dataclass(frozen=True)
class BreakerReply:
    allowed: bool
    state: str  # "closed" | "open" | "half_open" (CircuitState's values)
    consecutive_failures: int
    retry_in_s: float


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class SharedLimits:
    """The cluster-wide state of every provider's limiter and breaker, in Redis under `prefix`."""

    def __init__(self, client: Redis, *, prefix: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.prefix = prefix
        self._clock = clock
        self._spacing: LuaScript = client.register_script(SPACING_SCRIPT)
        self._pause: LuaScript = client.register_script(PAUSE_SCRIPT)
        self._breaker: LuaScript = client.register_script(BREAKER_SCRIPT)
        self._down_until = float("-inf")
        self._background: set[asyncio.Task[None]] = set()

    async def connect(self) -> bool:
        """Open a connection and load the scripts now, before the first provider call needs them; False (and the
        outage logged) when Redis does not answer."""
        try:
            async with asyncio.timeout(CALL_TIMEOUT_S):
                await self.client.ping()
                for script in (SPACING_SCRIPT, PAUSE_SCRIPT, BREAKER_SCRIPT):
                    await self.client.script_load(script)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # redis-py's ConnectionError/TimeoutError, OSError, our timeout
            self._went_down(exc)
            return False
        return True

    @property
    def available(self) -> bool:
        """False for RETRY_AFTER_S after a failed call: callers use their own limits without asking."""
        return self._clock() >= self._down_until

    def spacing_key(self, name: str) -> str:
        return f"{self.prefix}:spacing:{name}"

    def breaker_key(self, name: str) -> str:
        return f"{self.prefix}:breaker:{name}"

    async def _run(self, script: LuaScript, key: str, *args: Any) -> Any:
        if not self.available:
            raise SharedLimitsUnavailableError("shared limits: Redis did not answer recently")
        try:
            async with asyncio.timeout(CALL_TIMEOUT_S):
                reply = await script(keys=[key], args=list(args))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # redis-py's ConnectionError/TimeoutError/ResponseError, OSError, our timeout
            self._went_down(exc)
            raise SharedLimitsUnavailableError(f"shared limits: Redis failed: {type(exc).__name__}: {exc}") from exc
        if self._down_until > float("-inf"):
            self._down_until = float("-inf")
            log.info("shared_limits_restored", prefix=self.prefix)
        return reply

    def _went_down(self, exc: BaseException) -> None:
        first = self._down_until == float("-inf")
        self._down_until = self._clock() + RETRY_AFTER_S
        if first:
            log.warning(
                "shared_limits_unavailable",
                error=f"{type(exc).__name__}: {exc}",
                fallback="in-process rate limits and circuit breakers",
                retry_in_s=RETRY_AFTER_S,
            )

    # --- spacing -------------------------------------------------------------------------------------

    async def take_turn(self, name: str, interval_s: float) -> SpacingReply:
        """Grant the limiter `name` its next request now if no process had one within `interval_s` and no pause
        holds it; else say how long to wait (nothing is reserved)."""
        granted, wait_us, paused_us, now_us = await self._run(
            self._spacing, self.spacing_key(name), round(interval_s * MICROS), SPACING_KEY_SLACK_MS
        )
        return SpacingReply(bool(granted), int(wait_us) / MICROS, int(paused_us) / MICROS, int(now_us) / MICROS)

    async def pause(self, name: str, seconds: float) -> float:
        """Hold every process's next request of `name` for `seconds` (a longer pause already set stays)."""
        left_us = await self._run(self._pause, self.spacing_key(name), round(seconds * MICROS), SPACING_KEY_SLACK_MS)
        return int(left_us) / MICROS

    # --- breaker -------------------------------------------------------------------------------------

    async def breaker_step(self, name: str, op: str, *, threshold: int, reset_timeout_s: float) -> BreakerReply:
        """One transition of the breaker `name`: op is admit, failure, success or release (of a half-open probe)."""
        allowed, state, failures, retry_us = await self._run(
            self._breaker,
            self.breaker_key(name),
            op,
            threshold,
            round(reset_timeout_s * MICROS),
            round(PROBE_LEASE_S * MICROS),
            BREAKER_KEY_TTL_MS,
        )
        return BreakerReply(bool(allowed), _text(state), int(failures), int(retry_us) / MICROS)

    # --- fire and forget -----------------------------------------------------------------------------

    def in_background(self, step: Coroutine[Any, Any, Any], what: str) -> None:
        """Run `step` without waiting for it (a pause seen in sync code, a probe released while cancelled);
        a failure is the outage already logged, or logged here. Outside an event loop the step is dropped."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            step.close()
            return

        async def run() -> None:
            try:
                await step
            except SharedLimitsUnavailableError:
                pass
            except Exception:
                log.exception("shared_limits_step_failed", step=what)

        task = loop.create_task(run(), name=f"shared-limits-{what}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Wait for the background steps (before the client closes)."""
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
