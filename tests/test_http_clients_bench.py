"""The HTTP client micro-benchmark runs end to end at a tiny size and reports every configuration. No timing
is asserted: benchmarks are not timed tests."""

from __future__ import annotations

import pytest

from research_tool.bench.http_clients import compare

pytestmark = pytest.mark.slow


async def test_every_client_configuration_answers_every_request() -> None:
    rows = await compare(requests=30, callers=10, delay_s=0.0, gate=4)
    assert len(rows) == 4
    for name, row in rows.items():
        assert row is not None, f"{name}: not installed"
        assert row["failures"] == 0, name
        assert row["cpu_ms_per_request"] > 0 and row["wall_s"] >= 0
