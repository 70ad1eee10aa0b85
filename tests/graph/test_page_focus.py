"""Page focus: with the `semantic` extra on, a page longer than the engine reads keeps its passages nearest the
question (in page order, within the engine's budget); without the setting, the extra, or for an engine that reads
whole pages, the page is untouched. The test with the real encoder skips when its weights are absent."""

from __future__ import annotations

import asyncio
import re
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest

from research_tool.core.settings import Settings
from research_tool.engines.base import EngineStep, ExtractResult
from research_tool.engines.offline import OfflineEngine
from research_tool.engines.text.passages import best_within, cut_passages, joined
from research_tool.graph.context import ResearchContext
from research_tool.graph.nodes import page_focus
from research_tool.graph.nodes.process import process_node
from research_tool.models.entities import SourceResult
from research_tool.providers.gateway import SearchGateway
from research_tool.providers.local_corpus.embeddings import ENCODER_DIR_ENV, unavailable_reason

FILLER = [
    "The harbour was rebuilt in stone after the great storm, and its lighthouse was painted red and white.",
    "Local farmers grow barley and potatoes on the terraces above the river, and sell them at the market.",
    "The town council meets on the first Monday of each month in the old grammar school building.",
    "A narrow-gauge railway once carried slate from the quarries down to the quay for shipping abroad.",
]
ANSWER = "The bakery on Mill Lane was founded in 1872 by Agnes Porter, who baked rye loaves for the miners."
QUESTION = "Who founded the bakery on Mill Lane?"


def page(answer_last: bool = True) -> str:
    blocks = [*FILLER, *FILLER, ANSWER] if answer_last else [ANSWER, *FILLER, *FILLER]
    return "\n\n".join(blocks)


class WordCountEncoder:
    """A stand-in encoder: unit bag-of-words vectors over a tiny vocabulary (enough to rank by shared words)."""

    vocabulary = ("bakery", "mill", "lane", "founded", "harbour", "barley", "council", "railway")

    def encode(self, texts: list[str]) -> np.ndarray:
        rows = []
        for text in texts:
            found = re.findall(r"[a-z]+", text.lower())
            row = np.array([found.count(word) for word in self.vocabulary], dtype=np.float32) + 1e-3
            rows.append(row / np.linalg.norm(row))
        return np.stack(rows)


def context(*, source_chars: int | None, semantic: bool) -> ResearchContext:
    return cast(
        ResearchContext,
        SimpleNamespace(
            engine=SimpleNamespace(source_chars=source_chars), settings=SimpleNamespace(semantic_search=semantic)
        ),
    )


def focus(ctx: ResearchContext, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return asyncio.run(page_focus.focus_long_pages(ctx, QUESTION, entries))


@pytest.fixture
def fake_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(page_focus, "page_encoder", WordCountEncoder)


# --- passages ----------------------------------------------------------------------------------------------------


def test_passages_are_blocks_and_long_blocks_become_sentence_windows() -> None:
    long_block = " ".join(FILLER * 3)  # 12 sentences, about 200 words, one block
    text = f"{ANSWER}\n\n{long_block}\n\n  \n\n{FILLER[0]}"
    spans = cut_passages(text, max_words=60)
    assert text[spans[0][0] : spans[0][1]] == ANSWER
    assert text[spans[-1][0] : spans[-1][1]] == FILLER[0]
    windows = spans[1:-1]
    assert len(windows) >= 3
    assert all(len(text[s:e].split()) <= 60 for s, e in windows)
    assert " ".join(text[s:e] for s, e in windows) == long_block  # whole sentences, nothing lost


def test_each_line_is_a_paragraph_as_the_crawler_writes_them() -> None:
    text = f"{FILLER[0]}\n{ANSWER}\r\n  {FILLER[1]}\n"
    assert [text[s:e] for s, e in cut_passages(text)] == [FILLER[0], ANSWER, FILLER[1]]


def test_best_passages_fill_the_budget_in_page_order() -> None:
    text = "aaaa\n\nbbbbbbbbbb\n\ncc\n\ndddd"
    spans = cut_passages(text)
    kept = best_within(spans, [0.9, 0.8, 0.1, 0.7], budget=13)  # 4+2 fits, 10+2 does not, then 4+2 fits
    assert joined(text, kept) == "aaaa\n\ndddd"


# --- the graph helper ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("fake_encoder")
def test_a_long_page_keeps_the_passage_the_question_asks_about() -> None:
    text = page(answer_last=True)
    budget = len(ANSWER) + len(FILLER[0]) + 10
    assert text.index(ANSWER) > budget  # the first `budget` characters would miss it
    entries = [{"url": "https://example.org/town", "full_content": text}]
    focused = focus(context(source_chars=budget, semantic=True), entries)
    assert ANSWER in focused[0]["full_content"]
    assert len(focused[0]["full_content"]) <= budget
    assert entries[0]["full_content"] == text  # the caller's entry is not changed


@pytest.mark.usefixtures("fake_encoder")
@pytest.mark.parametrize(
    ("source_chars", "semantic", "text"),
    [
        (200, False, page()),  # the setting is off
        (None, True, page()),  # the engine reads whole pages (offline)
        (10_000, True, page()),  # the page fits the engine's budget
    ],
)
def test_nothing_changes_without_the_setting_or_a_budget_the_page_exceeds(
    source_chars: int | None, semantic: bool, text: str
) -> None:
    entries = [
        {"url": "https://example.org/town", "full_content": text},
        {"url": "https://example.org/s", "snippet": "x"},
    ]
    assert focus(context(source_chars=source_chars, semantic=semantic), entries) == entries


def test_without_the_encoder_the_page_is_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(page_focus, "page_encoder", lambda: None)
    entries = [{"url": "https://example.org/town", "full_content": page()}]
    assert focus(context(source_chars=200, semantic=True), entries) == entries


class ShortReader(OfflineEngine):
    """An engine that reads a source's first `source_chars` characters (as the LLM engine does), recording them."""

    def __init__(self, source_chars: int) -> None:
        super().__init__()
        self.budget = source_chars
        self.read: list[str] = []

    @property
    def source_chars(self) -> int | None:
        return self.budget

    async def extract(self, query: str, source: SourceResult, iteration: int) -> EngineStep[ExtractResult]:
        self.read.append(source.text())
        return EngineStep(value=ExtractResult())


@pytest.mark.usefixtures("fake_encoder")
@pytest.mark.parametrize("semantic", [True, False])
def test_the_process_node_hands_the_engine_the_focused_page(tmp_path: Any, semantic: bool) -> None:
    engine = ShortReader(source_chars=len(ANSWER) + len(FILLER[0]) + 10)
    settings = Settings(_env_file=None, data_dir=tmp_path, semantic_search=semantic)  # type: ignore[call-arg]
    ctx = ResearchContext(session_id="s", settings=settings, engine=engine, gateway=SearchGateway(), client=None)  # type: ignore[arg-type]
    url = "https://example.org/town"
    source = {"url": url, "title": "Our town", "source_name": "web", "full_content": page(), "best_rank": 1}
    state = {"iteration": 1, "tier": "simple", "request": {}, "refined_query": QUESTION, "sources": {url: source}}
    update = asyncio.run(process_node(state, cast(Any, SimpleNamespace(context=ctx))))  # type: ignore[arg-type]
    assert update["processed"] == {url: 1}
    [read] = engine.read
    if semantic:  # the engine would have read the page's first characters; it gets the passage that answers
        assert ANSWER in read and len(read) <= engine.budget
    else:
        assert read == page()


REASON = unavailable_reason(allow_download=False)


@pytest.mark.skipif(REASON is not None, reason=f"semantic extra or weights absent: {REASON}")
def test_the_real_encoder_finds_the_passage_that_answers_in_other_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(ENCODER_DIR_ENV, raising=False)
    encoder = page_focus.page_encoder()
    assert encoder is not None
    text = page(answer_last=True)
    kept = page_focus.focus_text(encoder, "Who started the bread shop, and when?", text, len(ANSWER) + 2)
    assert kept == ANSWER
