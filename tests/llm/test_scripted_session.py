"""The reusable session script answers every step validly through both protocols (no degraded step)."""

from __future__ import annotations

from research_tool.engines.base import NumberedSource, ReflectionContext, SynthesisInput
from research_tool.models.domain import DOMAINS
from research_tool.models.entities import SourceResult

from .conftest import Harness
from .scripted_answers import script_session

SOURCES = [
    SourceResult(
        url="https://example.org/subprocess",
        title="subprocess — Subprocess management",
        source_name="local",
        full_content=(
            "The subprocess module allows you to spawn new processes and obtain their return codes. "
            "The run function accepts a timeout argument in seconds. "
            "If the timeout expires, the child process is killed and TimeoutExpired is raised."
        ),
    ),
    SourceResult(
        url="https://example.org/asyncio",
        title="asyncio subprocesses",
        source_name="local",
        full_content=(
            "Python Software Foundation documents that asyncio can also create subprocesses and wait for them."
        ),
    ),
]
QUESTION = "How do I run a subprocess with a timeout in Python?"


async def test_every_step_runs_on_the_model(harness: Harness) -> None:
    script_session(
        harness.server,
        sufficient_after=2,
        extra_synthesis_sentence="It also cures colds [99].",
        unsupported_claims=["cures colds"],
    )
    engine = harness.engine

    clarified = (await engine.clarify(QUESTION, "technical")).value
    plan = (await engine.plan(clarified.refined_query, DOMAINS[clarified.domain], 3)).value
    extracted = [(await engine.extract(QUESTION, s, 1)).value for s in SOURCES]
    facts = [f for e in extracted for f in e.facts]
    entities = [x for e in extracted for x in e.entities]
    context = ReflectionContext(
        query=QUESTION,
        domain="technical",
        iteration=1,
        max_queries=3,
        facts=facts,
        entities=entities,
        sources=SOURCES,
        queries_run=[q.query for q in plan.queries],
        failed_queries=[],
    )
    first = (await engine.reflect(context)).value.response
    second = (await engine.reflect(context.model_copy(update={"iteration": 2}))).value.response
    draft = (
        await engine.synthesize(
            SynthesisInput(
                query=QUESTION, sources=[NumberedSource(n=i, source=s) for i, s in enumerate(SOURCES, 1)], facts=facts
            )
        )
    ).value
    verdicts = [
        await engine.supports(claim, SOURCES[0].full_content or "")
        for claim in ("The run function accepts a timeout.", "It also cures colds.")
    ]

    assert harness.fallback.calls == []
    assert (clarified.domain, clarified.tier, clarified.questions) == ("technical", "simple", [])
    assert [q.query for q in plan.queries] == [QUESTION, f"{QUESTION} evidence"]
    assert len(facts) == 4 and all(
        f.evidence[0].quote in (s.full_content or "")
        for f in facts
        for s in SOURCES
        if s.url == f.evidence[0].source_url
    )
    assert "python software foundation" in {e.key for e in entities}
    assert (first.sufficient, [q.query for q in first.new_queries]) == (False, [f"{QUESTION} follow-up 1"])
    assert second.sufficient and second.new_queries == []
    assert "[1]" in draft.answer and "[2]" in draft.answer and draft.answer.endswith("It also cures colds [99].")
    assert [f.citations for f in draft.findings] == [[1], [2]]
    assert verdicts == [True, False]
