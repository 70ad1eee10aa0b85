"""Users and the audit log in Postgres (migrations/0004_users.sql): the same as runtime/users.UserStore."""

from __future__ import annotations

import asyncio

from research_tool.core.errors import BadInputError
from research_tool.models.entities import utc_now_iso
from research_tool.runtime.postgres.pool import Pool
from research_tool.runtime.users import CLI_ACTOR, AuditRow, UserRow, check_user_name, hash_key, new_key

USER_COLUMNS = "name, key_id, key_hash, admin, created_at, revoked_at"


class PostgresUserStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._has_users = False

    async def add(self, name: str, *, admin: bool = False, actor: str = CLI_ACTOR) -> str:
        check_user_name(name)
        key, key_id = new_key()
        stored = await asyncio.to_thread(hash_key, key)
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "INSERT INTO users (name, key_id, key_hash, admin, created_at, revoked_at)"
                " VALUES (%s, %s, %s, %s, %s, NULL) ON CONFLICT (name) DO UPDATE SET key_id = excluded.key_id,"
                " key_hash = excluded.key_hash, admin = excluded.admin, created_at = excluded.created_at,"
                " revoked_at = NULL WHERE users.revoked_at IS NOT NULL",
                (name, key_id, stored, admin, utc_now_iso()),
            )
            if cur.rowcount == 0:
                raise BadInputError(f"user {name} exists; revoke it first to give it a new key")
            await conn.execute(
                "INSERT INTO audit (ts, actor, action, target, detail) VALUES (%s, %s, 'user_added', %s, %s)",
                (utc_now_iso(), actor, name, "admin" if admin else None),
            )
        return key

    async def revoke(self, name: str, *, actor: str = CLI_ACTOR) -> bool:
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "UPDATE users SET revoked_at = %s WHERE name = %s AND revoked_at IS NULL", (utc_now_iso(), name)
            )
            if cur.rowcount == 0:
                return False
            await conn.execute(
                "INSERT INTO audit (ts, actor, action, target) VALUES (%s, %s, 'user_revoked', %s)",
                (utc_now_iso(), actor, name),
            )
        return True

    async def list_users(self) -> list[UserRow]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(f"SELECT {USER_COLUMNS} FROM users ORDER BY name")
            return [_user(r) for r in await cur.fetchall()]

    async def by_key_id(self, key_id: str) -> UserRow | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(f"SELECT {USER_COLUMNS} FROM users WHERE key_id = %s", (key_id,))
            row = await cur.fetchone()
        return None if row is None else _user(row)

    async def any_users(self) -> bool:
        if not self._has_users:
            async with self._pool.connection() as conn:
                cur = await conn.execute("SELECT 1 AS found FROM users LIMIT 1")
                self._has_users = await cur.fetchone() is not None
        return self._has_users

    async def audit(self, actor: str, action: str, target: str | None = None, detail: str | None = None) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(
                "INSERT INTO audit (ts, actor, action, target, detail) VALUES (%s, %s, %s, %s, %s)",
                (utc_now_iso(), actor, action, target, detail),
            )

    async def audit_rows(self, *, limit: int = 100, actor: str | None = None) -> list[AuditRow]:
        where, params = ("WHERE actor = %s", (actor,)) if actor is not None else ("", ())
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT id, ts, actor, action, target, detail FROM audit {where} ORDER BY id DESC LIMIT %s",
                (*params, limit),
            )
            return [
                AuditRow(int(r["id"]), r["ts"], r["actor"], r["action"], r["target"], r["detail"])
                for r in await cur.fetchall()
            ]


def _user(row: dict[str, object]) -> UserRow:
    revoked = row["revoked_at"]
    return UserRow(
        name=str(row["name"]),
        key_id=str(row["key_id"]),
        key_hash=str(row["key_hash"]),
        admin=bool(row["admin"]),
        created_at=str(row["created_at"]),
        revoked_at=None if revoked is None else str(revoked),
    )
