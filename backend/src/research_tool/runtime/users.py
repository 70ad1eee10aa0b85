"""Who calls the server (issue 44): built-in users with API keys of their own, an `admin` role, the audit log and
the per-user limits, in the same store as the sessions (sessions.db on SQLite, the `users` and `audit` tables of
migrations/0004_users.sql on Postgres).

A key is `rt_<key id>_<secret>`: the key id (public, unique) finds the user's row, and the row keeps only a
salted scrypt hash of the whole key, never the key. A key that checked out once is remembered in memory by its
SHA-256 (`KeyCheck`), so a request costs one indexed read of the row (a revoked key stops working at once), not
an scrypt run. Nothing here ever logs, stores or returns a key except `add`, which returns the new one once.

`Principal` is whoever a request acts for: a user (`name`), an admin (sees and changes everything), or the local
single user (`LOCAL`: no key on a server with no users and no token, and the CLI on its own data dir), which is an
admin with no name. Sessions are owned by the name that created them (`owner`; NULL for the local user).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import re
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import aiosqlite

from research_tool.core.errors import BadInputError
from research_tool.models.entities import utc_now_iso

USER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$"
_USER_NAME = re.compile(USER_NAME_PATTERN)
KEY_PREFIX = "rt_"
_KEY = re.compile(r"^rt_([0-9a-f]{12})_([A-Za-z0-9_-]{20,100})$")
# scrypt's cost: 16 MiB and about 40 ms a check (once per key and process: KeyCheck remembers the good ones)
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
# The name RESEARCH_API_TOKEN acts as (an admin): what its sessions' owner and its audit lines say
TOKEN_USER = "admin"
# The actor of the CLI's changes (the local admin on its own data dir) in the audit log
CLI_ACTOR = "cli"
AUDIT_ACTIONS = ("start", "stop", "delete", "resume", "clarify", "user_added", "user_revoked", "tokens")

USERS_SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY,
    key_id TEXT NOT NULL UNIQUE,
    key_hash TEXT NOT NULL,
    admin INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts TEXT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS audit_by_actor ON audit (actor, action, ts);
"""


@dataclass(frozen=True)
class Principal:
    """Whoever a request acts for. `name` None: the local single user (an admin)."""

    name: str | None
    admin: bool
    permissions: tuple[str, ...] = ()
    # A RESEARCH_AUTH handler's user object, as its resource handlers get it back (api/custom_auth.py)
    user: Any = field(default=None, compare=False, repr=False)

    def sees(self, owner: str | None) -> bool:
        """Whether this caller may see (and change) something `owner` owns."""
        return self.admin or (self.name is not None and owner == self.name)

    @property
    def owner_filter(self) -> str | None:
        """The owner a list is narrowed to: None for an admin (every owner)."""
        return None if self.admin else self.name

    @property
    def actor(self) -> str:
        return self.name or "local"


LOCAL = Principal(name=None, admin=True)


def check_user_name(name: str) -> str:
    if name in (TOKEN_USER, "local", CLI_ACTOR):
        raise BadInputError(f"the user name {name!r} is reserved (RESEARCH_API_TOKEN acts as 'admin')")
    if not _USER_NAME.fullmatch(name):
        raise BadInputError(
            f"invalid user name {name[:80]!r}: use 1-64 letters, digits, '.', '_', '@' or '-', "
            "starting with a letter or digit"
        )
    return name


# --- keys -------------------------------------------------------------------------------------------


def new_key() -> tuple[str, str]:
    """A fresh key and its key id."""
    key_id = secrets.token_hex(6)
    return f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}", key_id


def key_id_of(key: str) -> str | None:
    """The key id of a key of ours; None for anything else (a RESEARCH_API_TOKEN, garbage)."""
    match = _KEY.fullmatch(key)
    return match[1] if match else None


def hash_key(key: str, salt: bytes | None = None) -> str:
    """`scrypt$<salt>$<hash>`, both base64: what a user's row keeps of their key."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.scrypt(key.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=32)
    return f"scrypt${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def key_matches(key: str, stored: str) -> bool:
    try:
        scheme, salt, _ = stored.split("$")
        if scheme != "scrypt":
            return False
        return hmac.compare_digest(hash_key(key, base64.b64decode(salt)), stored)
    except ValueError:
        return False


def fingerprint(key: str) -> str:
    """What the in-memory cache of checked keys holds instead of a key."""
    return hashlib.sha256(key.encode()).hexdigest()


# --- rows -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UserRow:
    name: str
    key_id: str
    key_hash: str
    admin: bool
    created_at: str
    revoked_at: str | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True)
class AuditRow:
    id: int
    ts: str
    actor: str
    action: str
    target: str | None
    detail: str | None


@dataclass(frozen=True)
class UserLimits:
    """A named user's limits (Settings: RESEARCH_USER_MAX_CONCURRENT_SESSIONS, RESEARCH_USER_MAX_SESSIONS_PER_DAY)."""

    max_active: int | None = None
    max_per_day: int | None = None
    max_tokens_per_day: int | None = None
    session_tokens: int = 0  # what an unfinished session may still spend (RESEARCH_TOKEN_BUDGET): reserved for it
    retry_after_s: int = 10  # what a 429 for the concurrent limit says (the runner's run-time estimate)

    @property
    def any(self) -> bool:
        return self.max_active is not None or self.max_per_day is not None or self.max_tokens_per_day is not None


def day_start(now: datetime | None = None) -> str:
    """The current UTC day's first instant, as the stores' ISO text."""
    now = now or datetime.now(UTC)
    return now.replace(hour=0, minute=0, second=0, microsecond=0).isoformat()


def seconds_to_midnight(now: datetime | None = None) -> int:
    now = now or datetime.now(UTC)
    tomorrow = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return max(1, int((tomorrow - now).total_seconds()) + 1)


def limit_reason(
    owner: str, limits: UserLimits, active: int, today: int, tokens_today: int = 0
) -> tuple[str, int] | None:
    """The one-line reason and Retry-After of a start over `limits` (None: within them). `tokens_today`: what the
    owner's finished sessions spent today; each unfinished one (and the new one) counts its whole token budget."""
    if limits.max_active is not None and active >= limits.max_active:
        return (
            f"user {owner} has {active} unfinished sessions, the most allowed at once "
            f"(RESEARCH_USER_MAX_CONCURRENT_SESSIONS={limits.max_active}); try again when one has finished",
            limits.retry_after_s,
        )
    if limits.max_per_day is not None and today >= limits.max_per_day:
        wait = seconds_to_midnight()
        return (
            f"user {owner} has started {today} sessions today, the most allowed per day "
            f"(RESEARCH_USER_MAX_SESSIONS_PER_DAY={limits.max_per_day}); try again after midnight UTC",
            wait,
        )
    if limits.max_tokens_per_day is not None:
        committed = tokens_today + (active + 1) * limits.session_tokens
        if committed > limits.max_tokens_per_day:
            # room once an unfinished session has finished (spending less than its budget), else tomorrow
            fits_later = active > 0 and tokens_today + limits.session_tokens <= limits.max_tokens_per_day
            return (
                f"user {owner} has spent {tokens_today} model tokens today and {active} unfinished sessions may spend "
                f"{active * limits.session_tokens} more; one more session (RESEARCH_TOKEN_BUDGET="
                f"{limits.session_tokens}) would pass RESEARCH_USER_MAX_TOKENS_PER_DAY={limits.max_tokens_per_day}",
                limits.retry_after_s if fits_later else seconds_to_midnight(),
            )
    return None


def spent_tokens_sql(placeholder: str) -> str:
    """Today's tokens of one user: the `tokens` audit lines their finished sessions left (detail: the count)."""
    return (
        "SELECT COALESCE(SUM(CAST(detail AS INTEGER)), 0) FROM audit"
        f" WHERE actor = {placeholder} AND action = 'tokens' AND ts >= {placeholder}"
    )


# --- the stores -------------------------------------------------------------------------------------


class UserStoreProtocol(Protocol):
    async def add(self, name: str, *, admin: bool = False, actor: str = CLI_ACTOR) -> str: ...
    async def revoke(self, name: str, *, actor: str = CLI_ACTOR) -> bool: ...
    async def list_users(self) -> list[UserRow]: ...
    async def by_key_id(self, key_id: str) -> UserRow | None: ...
    async def any_users(self) -> bool: ...
    async def audit(self, actor: str, action: str, target: str | None = None, detail: str | None = None) -> None: ...
    async def audit_rows(self, *, limit: int = 100, actor: str | None = None) -> list[AuditRow]: ...


def _user(row: Sequence[Any]) -> UserRow:
    name, key_id, key_hash, admin, created_at, revoked_at = row
    return UserRow(str(name), str(key_id), str(key_hash), bool(admin), str(created_at), revoked_at)


def _audit(row: Sequence[Any]) -> AuditRow:
    return AuditRow(int(row[0]), str(row[1]), str(row[2]), str(row[3]), row[4], row[5])


USER_COLUMNS = "name, key_id, key_hash, admin, created_at, revoked_at"


class UserStore:
    """Users and the audit log in sessions.db (SQLite), on an autocommit connection."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn
        self._has_users = False  # once true, true for good (users are revoked, never removed)

    async def add(self, name: str, *, admin: bool = False, actor: str = CLI_ACTOR) -> str:
        """A new user (or a revoked one again) with a fresh key, which is returned: it is never shown again."""
        check_user_name(name)
        existing = await self._by_name(name)
        if existing is not None and existing.active:
            raise BadInputError(f"user {name} exists; revoke it first to give it a new key")
        key, key_id = new_key()
        stored = await asyncio.to_thread(hash_key, key)
        await self._conn.execute(
            "INSERT INTO users (name, key_id, key_hash, admin, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, NULL)"
            " ON CONFLICT (name) DO UPDATE SET key_id = excluded.key_id, key_hash = excluded.key_hash,"
            " admin = excluded.admin, created_at = excluded.created_at, revoked_at = NULL",
            (name, key_id, stored, int(admin), utc_now_iso()),
        )
        await self.audit(actor, "user_added", name, "admin" if admin else None)
        return key

    async def revoke(self, name: str, *, actor: str = CLI_ACTOR) -> bool:
        cur = await self._conn.execute(
            "UPDATE users SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL", (utc_now_iso(), name)
        )
        if cur.rowcount == 0:
            return False
        await self.audit(actor, "user_revoked", name)
        return True

    async def _by_name(self, name: str) -> UserRow | None:
        async with self._conn.execute(f"SELECT {USER_COLUMNS} FROM users WHERE name = ?", (name,)) as cur:
            row = await cur.fetchone()
        return None if row is None else _user(tuple(row))

    async def list_users(self) -> list[UserRow]:
        async with self._conn.execute(f"SELECT {USER_COLUMNS} FROM users ORDER BY name") as cur:
            return [_user(tuple(r)) for r in await cur.fetchall()]

    async def by_key_id(self, key_id: str) -> UserRow | None:
        async with self._conn.execute(f"SELECT {USER_COLUMNS} FROM users WHERE key_id = ?", (key_id,)) as cur:
            row = await cur.fetchone()
        return None if row is None else _user(tuple(row))

    async def any_users(self) -> bool:
        if not self._has_users:
            async with self._conn.execute("SELECT 1 FROM users LIMIT 1") as cur:
                self._has_users = await cur.fetchone() is not None
        return self._has_users

    async def audit(self, actor: str, action: str, target: str | None = None, detail: str | None = None) -> None:
        await self._conn.execute(
            "INSERT INTO audit (ts, actor, action, target, detail) VALUES (?, ?, ?, ?, ?)",
            (utc_now_iso(), actor, action, target, detail),
        )

    async def audit_rows(self, *, limit: int = 100, actor: str | None = None) -> list[AuditRow]:
        where, params = ("WHERE actor = ?", (actor,)) if actor is not None else ("", ())
        async with self._conn.execute(
            f"SELECT id, ts, actor, action, target, detail FROM audit {where} ORDER BY id DESC LIMIT ?",
            (*params, limit),
        ) as cur:
            return [_audit(tuple(r)) for r in await cur.fetchall()]


def create_limited_sqlite(
    conn: sqlite3.Connection,
    insert_sql: str | None,
    row: Sequence[Any],
    owner: str,
    limits: UserLimits,
    active_statuses: Sequence[str],
) -> tuple[str, int] | None:
    """In the connection's own thread (no other statement interleaves): count the owner's unfinished sessions
    and today's starts, and only within the limits insert the session and its `start` audit line, in one
    savepoint. Returns the refusal (reason, Retry-After) instead when over a limit: nothing written.
    `insert_sql` None: only say whether a start would be refused now (nothing written either way)."""
    conn.execute("SAVEPOINT user_limits")
    try:
        marks = ",".join("?" for _ in active_statuses)
        active = int(
            conn.execute(
                f"SELECT COUNT(*) FROM sessions WHERE owner = ? AND status IN ({marks})", (owner, *active_statuses)
            ).fetchone()[0]
        )
        today = int(
            conn.execute(
                "SELECT COUNT(*) FROM audit WHERE actor = ? AND action = 'start' AND ts >= ?", (owner, day_start())
            ).fetchone()[0]
        )
        tokens_today = 0
        if limits.max_tokens_per_day is not None:
            tokens_today = int(conn.execute(spent_tokens_sql("?"), (owner, day_start())).fetchone()[0])
        refusal = limit_reason(owner, limits, active, today, tokens_today)
        if refusal is None and insert_sql is not None:
            conn.execute(insert_sql, row)
            conn.execute(
                "INSERT INTO audit (ts, actor, action, target, detail) VALUES (?, ?, 'start', ?, NULL)",
                (utc_now_iso(), owner, row[0]),
            )
            conn.execute("RELEASE user_limits")
        else:  # refused, or only asked
            conn.execute("ROLLBACK TO user_limits")
            conn.execute("RELEASE user_limits")
        return refusal
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK TO user_limits")
            conn.execute("RELEASE user_limits")
        raise


class KeyCheck:
    """Turns a presented key into a Principal: the user's row by its key id (revoked: refused at once), the scrypt
    check once per key and process (then its SHA-256 is remembered, never the key)."""

    def __init__(self, users: UserStoreProtocol) -> None:
        self._users = users
        self._checked: dict[str, str] = {}  # key id -> fingerprint of the key that matched its hash

    async def principal(self, key: str) -> Principal | None:
        key_id = key_id_of(key)
        if key_id is None:
            return None
        row = await self._users.by_key_id(key_id)
        if row is None or not row.active:
            self._checked.pop(key_id, None)
            return None
        seen = fingerprint(key)
        if self._checked.get(key_id) != seen:
            if not await asyncio.to_thread(key_matches, key, row.key_hash):
                return None
            self._checked[key_id] = seen
        return Principal(name=row.name, admin=row.admin)
