"""The page as a newcomer met it (issue 24, item 4), in Debian's Chromium against a real server: the answer's
own emphasis and code spans are rendered (as elements around text nodes, never parsed HTML), nothing is wider
than a 375 px phone screen (nor 360 or 420 px), counts read "1 cycle", and `/`, `/docs` and `/redoc` send no
request to any host but the server."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from markdown_it import MarkdownIt

from research_tool.bench.server_process import ServerProcess

from .conftest import TIMEOUT_MS, Outside, guard_context
from .test_web_page import CRAFTED_REPORT, RENDER, Watched, ask, assert_clean, open_page, wait_for_report

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("browser")]

HOSTILE = '<img src=x onerror="window.pwned=5">'
LONG_CALL = (
    "subprocess.run(args, *, stdin=None, input=None, stdout=None, stderr=None, capture_output=False, timeout=None)"
)
MARKDOWN_REPORT: dict[str, Any] = {
    **CRAFTED_REPORT,
    "short_answer": "subprocess.run(timeout=...)",
    "answered": False,
    "answer": (
        f"_The sources found do not answer this question. {HOSTILE} The closest statements they make:_\n\n"
        f"{LONG_CALL} [1].\n"
        f"Use `run(*args, **kwargs)` with a *timeout* and **capture_output** {HOSTILE} [2]."
    ),
    "findings": [
        {"statement": "If `check` is true, a non-zero exit raises *CalledProcessError*. [1]", "citations": ["[1]"],
         "confidence": 0.8, "verified": True, "contradictions": []},
    ],
    "metadata": {**CRAFTED_REPORT["metadata"], "iterations": 1},
}  # fmt: skip


PARSE = """async (cases) => {
  const { inlineMarkdown } = await import("/static/markdown.js");
  return cases.map((line) => {
    const box = document.createElement("div");
    box.append(...inlineMarkdown(line));
    return box.innerHTML;
  });
}"""


async def assert_markdown_rendered_as_elements_around_text(page: Any) -> None:
    await page.evaluate(RENDER, MARKDOWN_REPORT)

    note = page.locator("#answer p.note em")
    assert await note.count() == 1
    assert (await note.text_content() or "").startswith("The sources found do not answer this question.")
    answer_text = await page.text_content("#answer") or ""
    assert "_The sources" not in answer_text and ":_" not in answer_text
    assert await page.locator("#answer code").all_text_contents() == ["run(*args, **kwargs)"]
    assert await page.locator("#answer p:not(.note) em").all_text_contents() == ["timeout"]
    assert await page.locator("#answer strong").all_text_contents() == ["capture_output"]
    assert LONG_CALL in answer_text  # its `*` is no emphasis
    assert HOSTILE in answer_text and await page.locator("#report img").count() == 0
    assert await page.evaluate("window.pwned") is None
    assert await page.locator("#answer a.cite").count() == 2  # markers still link inside rendered lines
    assert await page.locator("#findings code").all_text_contents() == ["check"]
    assert await page.locator("#findings em").all_text_contents() == ["CalledProcessError"]

    meta = await page.text_content("#report .meta") or ""
    assert "1 cycle ·" in meta and "1 cycles" not in meta

    # the page's small parser against markdown-it (the exports' parser) on random delimiter soup
    rng = random.Random(24)
    pieces = [*"*_` ab.(),<&", "**", "__", "``", " x ", "run(", ")"]
    cases = ["a *b* `c` _d_", "run(*args, **kwargs)", "***a** b*", "*a **b** c*", "__a_b__", "foo_bar_", "`a``b`"]
    cases += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(1500)]
    rendered = await page.evaluate(PARSE, cases)
    expected = MarkdownIt("zero").enable(["emphasis", "backticks"])
    assert [(c, r) for c, r in zip(cases, rendered, strict=True) if r != expected.renderInline(c)] == []


async def widest(page: Any) -> dict[str, Any]:
    """The document's scroll width and every element that reaches past the viewport's right edge."""
    result: dict[str, Any] = await page.evaluate(
        """() => {
          const width = document.documentElement.clientWidth;
          const past = [...document.querySelectorAll('body *')]
            .filter(e => e.getClientRects().length && e.getBoundingClientRect().right > width + 0.5)
            .filter(e => !e.closest('.table-wrap, .event-log, .live-sources'))  // these scroll on purpose
            .map(e => `${e.tagName.toLowerCase()}#${e.id}.${e.className}`);
          return { scroll: document.documentElement.scrollWidth, width, past: past.slice(0, 12) };
        }"""
    )
    return result


# `make run`'s short answer (issue 43: one token of 46 characters made the page 387 px wide at 375)
MAKE_RUN_SHORT_ANSWER = "subprocess.run(capture_output=..., timeout=...)"

# Every word of every saturation-table header and cell that wraps across lines ("Cycl e", "Coverag e").
BROKEN_WORDS = """() => {
  const broken = [];
  for (const cell of document.querySelectorAll('.saturation th, .saturation td')) {
    const text = cell.firstChild;
    if (!text || text.nodeType !== Node.TEXT_NODE) continue;
    for (const match of text.data.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(text, match.index);
      range.setEnd(text, match.index + match[0].length);
      const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
      if (tops.size > 1) broken.push(match[0]);
    }
  }
  return broken;
}"""


async def test_on_a_phone_the_report_renders_its_markdown_and_nothing_overflows(
    server: ServerProcess, browser: Any, outside: Outside, artifacts_dir: Path
) -> None:
    width = 375
    context = await browser.new_context(viewport={"width": width, "height": 780}, is_mobile=True, has_touch=True)
    context.set_default_timeout(TIMEOUT_MS)
    await guard_context(context, outside)
    try:
        watched = await open_page(context, server.base_url)
        page = watched.page
        for size in (width, 360, 420):
            await page.set_viewport_size({"width": size, "height": 780})
            assert await widest(page) == {"scroll": size, "width": size, "past": []}, f"the form at {size} px"

        await page.set_viewport_size({"width": width, "height": 780})
        await ask(page, "How do I run a subprocess with a timeout and capture its output?", providers=["local"])
        await wait_for_report(page)
        assert await widest(page) == {"scroll": width, "width": width, "past": []}, "the session's report"
        # the privacy default sends none: the server's rule says what the CLI says (issue 43, item 3)
        assert "privacy local only" in (await page.text_content("#report .meta") or "")
        badge = await page.locator("#session-status").bounding_box()
        assert badge is not None and badge["x"] + badge["width"] <= width
        await assert_markdown_rendered_as_elements_around_text(page)  # and a long API signature, long titles
        for size in (width, 360, 420):
            await page.set_viewport_size({"width": size, "height": 780})
            assert await widest(page) == {"scroll": size, "width": size, "past": []}, f"the session at {size} px"
            # issue 34: the saturation table fits its card, no column behind a horizontal scroll
            table = await page.evaluate(
                "() => { const w = document.querySelector('.table-wrap'); return [w.scrollWidth, w.clientWidth]; }"
            )
            assert table[0] <= table[1], f"the saturation table at {size} px: {table}"
            assert await page.evaluate(BROKEN_WORDS) == [], f"words broken in the saturation table at {size} px"
        await page.set_viewport_size({"width": width, "height": 780})
        await page.evaluate(RENDER, {**CRAFTED_REPORT, "short_answer": MAKE_RUN_SHORT_ANSWER})
        assert await widest(page) == {"scroll": width, "width": width, "past": []}, "make run's short answer"
        shot = artifacts_dir / f"page-{width}px.png"
        await page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot: {shot}")
        assert_clean(watched, outside)
    finally:
        await context.close()


async def test_the_page_and_the_api_docs_ask_nothing_of_any_other_host(
    server: ServerProcess, context: Any, outside: Outside
) -> None:
    own = urlsplit(server.base_url).netloc
    requested: list[str] = []
    page = await context.new_page()
    watched = Watched(page)
    page.on("request", lambda request: requested.append(request.url))
    await page.goto(server.base_url + "/")
    await page.wait_for_selector("#provider-list input[value='local']")
    await page.goto(server.base_url + "/docs")
    await page.wait_for_selector(".swagger-ui .opblock-summary-path")
    await page.goto(server.base_url + "/redoc")
    await page.wait_for_selector("#redoc .api-content h1, #redoc [role='navigation']")
    await page.wait_for_load_state("networkidle")
    logo = page.locator("#redoc img[alt='redocly logo']")
    if await logo.count():  # ReDoc's sidebar logo, now one of our files
        assert (await logo.get_attribute("src") or "").startswith("/static/")
    foreign = [url for url in requested if urlsplit(url).scheme in ("http", "https", "ws", "wss")]
    foreign = [url for url in foreign if urlsplit(url).netloc != own]
    assert foreign == []
    assert requested, "no request was recorded at all"
    assert_clean(watched, outside)  # no attempt blocked by the guard, no console error (a CSP refusal is one)
