"""The server keeps its startup objects out of the collector's walks while it runs (gc.freeze) and hands them
back when it stops, so building the app again in one process does not pin the last app's garbage."""

from __future__ import annotations

import gc
from pathlib import Path

from research_tool.core.settings import Settings
from tests.api.conftest import serve


async def test_startup_objects_are_frozen_while_serving_and_released_at_shutdown(tmp_path: Path) -> None:
    gc.unfreeze()
    async with serve(Settings(_env_file=None, data_dir=tmp_path / "data", llm="offline")) as api:
        assert (await api.client.get("/healthz")).status_code == 200
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
