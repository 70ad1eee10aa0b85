"""Users on Postgres (issue 44): the same behaviour as on SQLite (tests/storage/test_users.py)."""

from __future__ import annotations

from research_tool.core.settings import Settings
from tests.storage.test_users import exercise_users


async def test_users_keys_and_the_audit_log(pg_settings: Settings) -> None:
    await exercise_users(pg_settings)
