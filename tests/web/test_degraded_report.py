"""The report view names the failed providers and why once, as text (issue 24, item 2)."""

from __future__ import annotations

from typing import Any

import pytest

from research_tool.bench.server_process import ServerProcess

from .conftest import Outside
from .test_web_page import CRAFTED_REPORT, HOSTILE, RENDER, assert_clean, open_page

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("browser")]

REASON = (
    "Search was limited, 20 of 30 searches failed: duckduckgo: 10 of 10 searches failed (host not found (DNS) 1, "
    f"circuit open 9); wikipedia: 10 of 10 searches failed (timed out 3, circuit open 7) {HOSTILE}."
)


async def test_a_degraded_report_names_the_failed_providers_once_as_text(
    server: ServerProcess, context: Any, outside: Outside
) -> None:
    watched = await open_page(context, server.base_url)
    page = watched.page
    failures = [
        {"provider": "duckduckgo", "calls": 10, "failed": 10, "reasons": {"dns": 1, "circuit_open": 9}},
        {"provider": "wikipedia", "calls": 10, "failed": 10, "reasons": {"timeout": 3, "circuit_open": 7}},
    ]
    meta = {**CRAFTED_REPORT["metadata"], "degraded_mode": True, "degraded_reason": REASON,
            "provider_failures": failures}  # fmt: skip
    await page.evaluate(RENDER, {**CRAFTED_REPORT, "metadata": meta})

    assert await page.locator("#degraded").count() == 1
    # issue 34: other providers answered (the citations are tavily's and brave's): a plain line, no warning
    assert await page.text_content("#degraded") == f"Searches that failed: {REASON}"
    assert await page.locator("#degraded.muted").count() == 1
    text = await page.text_content("#report") or ""
    assert text.count("duckduckgo: 10 of 10") == 1 and text.count("host not found (DNS)") == 1
    assert await page.locator("#degraded *").count() == 0  # one text node: the hostile part stays text
    assert await page.evaluate("window.__pwned") is None

    # nothing answered: a warning
    await page.evaluate(RENDER, {**CRAFTED_REPORT, "citations": [], "metadata": meta})
    assert await page.text_content("#degraded") == f"Degraded: {REASON}"
    assert await page.locator("#degraded.degraded").count() == 1

    # a report that is not degraded says nothing of it
    await page.evaluate(RENDER, CRAFTED_REPORT)
    assert await page.locator("#degraded").count() == 0
    assert_clean(watched, outside)
