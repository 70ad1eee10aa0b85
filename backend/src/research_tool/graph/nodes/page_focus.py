"""Page focus: a page longer than what the engine's extraction reads keeps its passages nearest the question.

The LLM engine shows its model a source's first `LLMLimits.max_source_chars` characters (`engine.source_chars`).
With the `semantic` extra turned on (RESEARCH_SEMANTIC_SEARCH=1) and the encoder's weights present, a longer page is
cut into passages (engines/text/passages.py), each passage is scored by the sentence encoder's cosine to the
question, and the best passages up to that budget, in page order, are what extraction reads. On simulated fetched
pages (HotpotQA and MuSiQue train100, `python -m research_tool.eval.web_passages`) this kept more of the evidence
than the first characters did on the long MuSiQue pages; docs/semantic-search.md, "Web pages", has the figures.

Nothing changes without the setting, without the extra or its weights (no model is loaded), for an engine that
reads whole pages (the offline engine: there the measured gain was within noise at over 100 times its extraction's
cost), or for a page within the budget. The encoding runs in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from research_tool.core.logging import get_logger
from research_tool.engines.text.passages import best_within, cut_passages, joined
from research_tool.graph.context import ResearchContext
from research_tool.providers.local_corpus.embeddings import EncoderUnavailableError, load_encoder

if TYPE_CHECKING:
    from research_tool.providers.local_corpus.embeddings import SentenceEncoder

log = get_logger(__name__)

MAX_FOCUS_PASSAGES = 60  # passages scored per page (about 30,000 characters, ~5 CPU-s in numpy); later ones not kept


def page_encoder() -> SentenceEncoder | None:
    """The process's sentence encoder, or None (logged) when the extra or its weights are missing."""
    try:
        return load_encoder(allow_download=False)
    except EncoderUnavailableError as exc:
        log.info("page_focus_unavailable", reason=exc.message)
        return None


def focus_text(encoder: SentenceEncoder, question: str, text: str, budget: int) -> str:
    """The page's passages most similar to the question, up to `budget` characters, in page order."""
    passages = cut_passages(text)[:MAX_FOCUS_PASSAGES]
    vectors = encoder.encode([question] + [text[start:end] for start, end in passages])
    scores = [float(score) for score in vectors[1:] @ vectors[0]]
    return joined(text, best_within(passages, scores, budget))


def _focus_all(question: str, texts: Sequence[str], budget: int) -> list[str] | None:
    encoder = page_encoder()
    if encoder is None:
        return None
    return [focus_text(encoder, question, text, budget) for text in texts]


async def focus_long_pages(ctx: ResearchContext, question: str, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries, with the text of each page longer than the engine reads cut down to its best passages."""
    budget = ctx.engine.source_chars
    if budget is None or not ctx.settings.semantic_search:
        return entries
    long = [i for i, e in enumerate(entries) if len(e.get("full_content") or "") > budget]
    if not long:
        return entries
    focused = await asyncio.to_thread(_focus_all, question, [str(entries[i]["full_content"]) for i in long], budget)
    if focused is None:
        return entries
    result = list(entries)
    for i, text in zip(long, focused, strict=True):
        if text.strip():
            log.info("page_focused", url=entries[i]["url"], chars=len(entries[i]["full_content"]), kept=len(text))
            result[i] = {**entries[i], "full_content": text}
    return result
