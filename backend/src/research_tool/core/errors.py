"""Typed exceptions. Every failure the tool knows about has a class here.

`retryable` tells callers (and the API's error body) whether the same call may succeed later.
"""

from __future__ import annotations


class ResearchToolError(Exception):
    """Base of every error this package raises on purpose."""

    retryable: bool = False
    error_type: str = "research_tool_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- bad input and session lookups (API 4xx, CLI exit 2) -------------------------------------


class BadInputError(ResearchToolError):
    """The caller asked for something invalid (empty query, unknown tier, missing folder...)."""

    error_type = "bad_input"


class DataDirInUseError(BadInputError):
    """Another process owns the SQLite data dir (one process per data dir): CLI exit 2, naming its PID."""

    error_type = "data_dir_in_use"

    def __init__(self, message: str, *, owner_pid: int | None) -> None:
        super().__init__(message)
        self.owner_pid = owner_pid


class SessionNotFoundError(ResearchToolError):
    error_type = "not_found"


class SessionStateError(ResearchToolError):
    """The session exists but is not in a state that allows the request (report before completion...)."""

    error_type = "conflict"


class ReentrantLockError(ResearchToolError):
    """A task asked for a per-key lock it already holds: waiting would hang it (and every later request on the
    key) for good, so this is raised instead. Always a bug of the caller."""

    error_type = "internal_error"


class ServerBusyError(ResearchToolError):
    """The server already holds as many sessions as it may (running + queued): try again after `retry_after_s`.
    Nothing was created (API 503 with Retry-After)."""

    error_type = "server_busy"
    retryable = True

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class UserLimitError(ResearchToolError):
    """A user is at one of their limits (concurrent sessions, sessions per day): nothing was created (API 429 with
    Retry-After and the one-line reason)."""

    error_type = "user_limit"
    retryable = True

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class StorageUnavailableError(ResearchToolError):
    """The database RESEARCH_DATABASE_URL names cannot be reached (CLI exit 3, the server does not start)."""

    error_type = "storage_unavailable"
    retryable = True


# --- providers --------------------------------------------------------------------------------


class ProviderError(ResearchToolError):
    """A search provider or the crawler could not deliver."""

    error_type = "provider_error"

    def __init__(self, provider: str, message: str, *, url: str | None = None) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider
        self.url = url


class ProviderUnavailableError(ProviderError):
    """Not configured (missing key or email) or switched off."""

    error_type = "provider_unavailable"


class RateLimitError(ProviderError):
    error_type = "rate_limited"
    retryable = True

    def __init__(
        self, provider: str, message: str, *, retry_after: float | None = None, url: str | None = None
    ) -> None:
        super().__init__(provider, message, url=url)
        self.retry_after = retry_after


class ProviderTimeoutError(ProviderError):
    error_type = "timeout"
    retryable = True


class SessionDeadlineError(ProviderTimeoutError):
    """The session's time limit cut the call off: not the provider's fault (issue 35), and never retried."""

    error_type = "session_deadline"
    retryable = False


class ProviderServerError(ProviderError):
    """5xx from the provider."""

    error_type = "server_error"
    retryable = True

    def __init__(self, provider: str, message: str, *, status: int, url: str | None = None) -> None:
        super().__init__(provider, message, url=url)
        self.status = status


class HostUnresolvedError(ProviderError):
    """The provider's host name could not be resolved (no network, no DNS, a typo in its base URL): not
    retried, and its circuit breaker opens at once, so a session without network ends in seconds."""

    error_type = "dns"


class AccessDeniedError(ProviderError):
    """401/402/403, paywall or CAPTCHA: do not retry, record and move on."""

    error_type = "access_denied"


class ProviderResponseError(ProviderError):
    """The provider answered, but with an error body or a payload we cannot parse (4xx other than auth)."""

    error_type = "bad_response"


class CircuitOpenError(ProviderError):
    error_type = "circuit_open"
    retryable = True


class FetchRefusedError(ProviderError):
    """The crawler refused a URL (private address, bad scheme, too large, not text)."""

    error_type = "fetch_refused"


class SharedLimitsUnavailableError(ResearchToolError):
    """The Redis that shares the providers' limits across processes did not answer: the caller falls back to
    its process's own limiter and breaker (never surfaced to a session)."""

    error_type = "shared_limits_unavailable"
    retryable = True


# --- engines ----------------------------------------------------------------------------------


class EngineError(ResearchToolError):
    error_type = "engine_error"


class EngineUnavailableError(EngineError):
    """The configured model server cannot be reached or the model spec is invalid."""

    error_type = "engine_unavailable"


class EngineOutputError(EngineError):
    """The model's answer did not validate against the expected schema."""

    error_type = "engine_output"
    retryable = True
