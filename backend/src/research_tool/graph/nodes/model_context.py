"""What a model-backed engine gets to see: compaction of older sources (seed 000 §9) and the
semantic citation check. Both are no-ops for the offline engine, which has no context window."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from research_tool.engines.base import NumberedSource, SynthesisDraft
from research_tool.engines.compaction import compact_sources, estimate_tokens, should_compact
from research_tool.graph.context import ResearchContext
from research_tool.graph.nodes.instrumentation import tokens_total
from research_tool.graph.report_assembly import MARKER
from research_tool.graph.session_limits import SessionLimits
from research_tool.models.state import ResearchState

SEMANTIC_CHECK_CONCURRENCY = 4


def uses_model(ctx: ResearchContext) -> bool:
    return ctx.engine.name == "llm"


async def compact_for_model(
    ctx: ResearchContext,
    state: ResearchState,
    limits: SessionLimits,
    sources: list[dict[str, Any]],
    *,
    phase: str,
    keep_recent: int,
    before_synthesis: bool,
) -> list[dict[str, Any]]:
    """The sources to show the model: all of them, or the recent ones whole and older ones as handles."""
    if not uses_model(ctx):
        return sources
    reason = should_compact(tokens_total(state), limits.token_budget, estimate_tokens(dict(state)), before_synthesis)
    if reason is None:
        return sources
    kept, summary = compact_sources(sources, keep_recent=keep_recent)
    await ctx.events.emit(
        "compaction",
        phase,
        f"Compacted {summary.compacted} older sources for the model ({reason}).",
        {"reason": reason, **summary.model_dump(exclude={"handles", "compacted_urls"})},
    )
    return [*kept, *summary.handles]


async def drop_unsupported_claims(
    ctx: ResearchContext, draft: SynthesisDraft, numbered: list[NumberedSource]
) -> tuple[SynthesisDraft, int, int]:
    """RESEARCH_VERIFY_CITATIONS=semantic: ask the model whether each cited source supports each answer
    sentence and finding; drop the [n] it rejects and whatever is left without a citation.
    Returns (draft, citations removed, tokens)."""
    check_support = getattr(ctx.engine, "check_support", None)
    if ctx.settings.verify_citations != "semantic" or check_support is None:
        return draft, 0, 0
    texts = {ns.n: ns.source.text() for ns in numbered}
    semaphore = asyncio.Semaphore(SEMANTIC_CHECK_CONCURRENCY)
    tokens = 0

    async def supported(claim: str, cited: list[int]) -> set[int]:
        nonlocal tokens

        async def one(n: int) -> bool:
            nonlocal tokens
            async with semaphore:
                step = await check_support(MARKER.sub("", claim).strip(), texts[n])
            tokens += step.tokens
            return bool(step.value)

        known = [n for n in cited if n in texts]
        verdicts = await asyncio.gather(*(one(n) for n in known))
        return {n for n, ok in zip(known, verdicts, strict=True) if ok}

    def strip_rejected(text: str, keep: set[int]) -> str:
        return MARKER.sub(lambda m: m.group(0) if int(m.group(1)) in keep else "", text)

    removed = 0
    answer_parts: list[str] = []
    for sentence in SENTENCE_END.split(draft.answer.strip()):
        cited = [int(m) for m in MARKER.findall(sentence)]
        keep = await supported(sentence, cited) if cited else set()
        removed += len(set(cited) - keep)
        if not cited or keep:
            answer_parts.append(strip_rejected(sentence, keep) if cited else sentence)
    findings = []
    for finding in draft.findings:
        keep = await supported(finding.statement, finding.citations)
        removed += len(set(finding.citations) - keep)
        if keep:
            findings.append(
                finding.model_copy(
                    update={"statement": strip_rejected(finding.statement, keep), "citations": sorted(keep)}
                )
            )
    answer = " ".join(p for p in answer_parts if p.strip())
    return draft.model_copy(update={"answer": answer, "findings": findings}), removed, tokens


SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[])|(?<=\])\s+(?=[A-Z])")
