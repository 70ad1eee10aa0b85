"""Users in the data dir's sessions.db (issue 44): added, listed, revoked and re-added; a key is stored only as a
salted hash; KeyCheck turns a key into its user until it is revoked; the audit log names who did what."""

from __future__ import annotations

from pathlib import Path

import pytest

from research_tool.core.errors import BadInputError
from research_tool.core.settings import Settings
from research_tool.runtime.backends import open_users
from research_tool.runtime.users import KeyCheck, hash_key, key_matches, new_key


async def exercise_users(settings: Settings) -> None:
    """Both stores answer alike (the Postgres tests run this too)."""
    async with open_users(settings) as users:
        assert not await users.any_users()
        alice = await users.add("alice")
        carol = await users.add("carol", admin=True, actor="root")
        assert await users.any_users()
        with pytest.raises(BadInputError):
            await users.add("alice")  # active: revoke first
        with pytest.raises(BadInputError):
            await users.add("admin")  # RESEARCH_API_TOKEN's name
        rows = {r.name: r for r in await users.list_users()}
        assert rows["carol"].admin and not rows["alice"].admin
        assert all(alice not in r.key_hash and r.key_hash.startswith("scrypt$") for r in rows.values())

        keys = KeyCheck(users)
        found = await keys.principal(alice)
        assert found is not None and (found.name, found.admin) == ("alice", False)
        admin = await keys.principal(carol)
        assert admin is not None and admin.admin
        assert await keys.principal(alice[:-3] + "xyz") is None
        assert await keys.principal("not-a-key") is None

        assert await users.revoke("alice")
        assert not await users.revoke("alice")
        assert await keys.principal(alice) is None  # at once, though it checked out before
        again = await users.add("alice")
        assert again != alice and await keys.principal(alice) is None
        assert (await keys.principal(again)) is not None

        await users.audit("alice", "stop", "some-session")
        lines = [(r.actor, r.action, r.target) for r in await users.audit_rows()]
        assert lines[0] == ("alice", "stop", "some-session")
        assert ("cli", "user_added", "alice") in lines and ("root", "user_added", "carol") in lines
        assert ("cli", "user_revoked", "alice") in lines
        assert [r.action for r in await users.audit_rows(actor="root")] == ["user_added"]


async def test_users_on_sqlite(tmp_path: Path) -> None:
    await exercise_users(Settings(_env_file=None, data_dir=tmp_path / "data"))  # type: ignore[call-arg]


def test_a_key_is_checked_against_its_salted_hash() -> None:
    key, key_id = new_key()
    stored = hash_key(key)
    assert key_id in key and key not in stored and stored != hash_key(key)  # a fresh salt each time
    assert key_matches(key, stored) and not key_matches(key + "x", stored) and not key_matches(key, "garbage")
