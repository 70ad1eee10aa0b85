import re

from research_tool.engines.base import NumberedSource, ReflectionContext, SynthesisInput
from research_tool.engines.offline import OfflineEngine
from research_tool.engines.text.keyphrases import query_signature
from research_tool.graph.decisions.citations import check_citations
from research_tool.graph.decisions.verification import cross_verify
from research_tool.models.domain import DOMAINS
from research_tool.models.entities import Fact, normalize_key
from tests.engine.corpus_texts import CORLISS_ARCHER_RADIO, KISS_AND_TELL, SHIRLEY_TEMPLE, source

QUESTION = "Which government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
KISS = source(
    "file:///h.jsonl#1",
    "Kiss and Tell (1945 film)",
    KISS_AND_TELL,
    query="government position Corliss Archer Kiss Tell",
)
RADIO = source(
    "file:///h.jsonl#3",
    "Meet Corliss Archer",
    CORLISS_ARCHER_RADIO,
    query="government position Corliss Archer Kiss Tell",
)


async def _facts(engine: OfflineEngine, sources, iteration: int) -> list[Fact]:
    facts: list[Fact] = []
    for item in sources:
        facts += (await engine.extract(QUESTION, item, iteration)).value.facts
    return facts


def _context(facts, sources, queries_run, iteration, trail=None, max_queries=3) -> ReflectionContext:
    return ReflectionContext(
        query=QUESTION,
        domain="general",
        iteration=iteration,
        max_queries=max_queries,
        facts=facts,
        entities=[],
        sources=sources,
        queries_run=queries_run,
        failed_queries=[],
        trail=trail or {},
    )


async def test_clarify_refines_detects_and_asks_only_when_ambiguous() -> None:
    engine = OfflineEngine()
    clear = (await engine.clarify("  How does  asyncio schedule coroutines in Python?  ", None)).value
    assert clear.refined_query == "How does asyncio schedule coroutines in Python?"
    assert clear.domain == "technical" and clear.questions == []
    vague = (await engine.clarify("mercury", None)).value
    assert 1 <= len(vague.questions) <= 2 and "planet" in vague.questions[0]
    multi_hop = (await engine.clarify(QUESTION, "general")).value
    assert multi_hop.tier == "standard" and multi_hop.tier_reason
    refined = (await engine.apply_answers("mercury", vague.questions, ["the planet", " its orbit "])).value
    assert refined == "mercury (the planet; its orbit)"
    step = await engine.clarify("mercury", None)
    assert step.tokens == 0 and step.errors == []


async def test_plan_gives_distinct_queries_with_intents_first_close_to_question() -> None:
    engine = OfflineEngine()
    for max_queries in (3, 5, 10):
        plan = (await engine.plan(QUESTION, DOMAINS["general"], max_queries)).value.queries
        assert 3 <= len(plan) <= max_queries
        assert len({query_signature(q.query) for q in plan}) == len(plan)
        assert all(q.intent for q in plan)
    first = plan[0].query
    assert {"government", "position", "Corliss", "Archer", "Kiss"} <= set(first.split())
    technical = (
        await engine.plan("How do I run a subprocess with a timeout in Python?", DOMAINS["technical"], 5)
    ).value
    assert {q.intent for q in technical.queries} >= {"mechanism", "example"}
    again = (await engine.plan(QUESTION, DOMAINS["general"], 10)).value.queries
    assert again == plan  # deterministic


async def test_extract_returns_facts_and_typed_entities() -> None:
    result = (await OfflineEngine().extract(QUESTION, KISS, 1)).value
    assert result.facts and result.facts[0].evidence[0].quote in KISS_AND_TELL
    types = {e.name: e.entity_type for e in result.entities}
    assert types["Kiss and Tell"] == "work"  # the document's own subject, typed by its first sentence
    assert types["Shirley Temple"] == "person"
    assert all(e.sources == [KISS.url] for e in result.entities)


async def test_reflect_follows_the_trail_to_the_bridge_entity() -> None:
    engine = OfflineEngine()
    cycle1_sources = [KISS, RADIO]
    facts = await _facts(engine, cycle1_sources, 1)
    queries_run = ["government position Corliss Archer Kiss Tell"]
    outcome = (await engine.reflect(_context(facts, cycle1_sources, queries_run, 1))).value
    queries = [q.query for q in outcome.response.new_queries]
    assert queries[0].startswith("Shirley Temple") and "government position" in queries[0]
    assert outcome.response.new_queries[0].intent == "follow_trail"
    assert outcome.trail["shirley temple"] == 1 and set(outcome.trail) <= {
        normalize_key(n)
        for n in ("Shirley Temple", "CBS", "F. Hugh Herbert", "Priscilla Lyon", "Lugene Sanders", "Janet Waldo")
    }
    assert outcome.slots["bridge:woman"] and not outcome.slots["answer"]
    assert not outcome.response.sufficient
    assert any("government position" in gap for gap in outcome.response.gaps)
    assert len(queries) <= 3

    # cycle 2: the trail query found Shirley Temple's page
    temple = source("file:///h.jsonl#2", "Shirley Temple", SHIRLEY_TEMPLE, query=queries[0])
    sources = [*cycle1_sources, temple]
    facts = cross_verify(facts + await _facts(engine, [temple], 2), {s.url: s for s in sources}, 0.6)
    ambassador = next(f for f in facts if "ambassador" in f.statement)
    assert ambassador.relevance >= 0.5
    outcome2 = (await engine.reflect(_context(facts, sources, queries_run + queries, 2, outcome.trail))).value
    run = {query_signature(q) for q in queries_run + queries}
    assert all(query_signature(q.query) not in run for q in outcome2.response.new_queries)
    assert "shirley temple" in outcome2.trail


async def test_reflect_respects_trail_depth_and_never_repeats() -> None:
    engine = OfflineEngine()
    temple = source("file:///h.jsonl#2", "Shirley Temple", SHIRLEY_TEMPLE, query="Shirley Temple government position")
    facts = await _facts(engine, [temple], 2)
    deep = (await engine.reflect(_context(facts, [temple], [], 2, {"shirley temple": 2}))).value
    followed = [q for q in deep.response.new_queries if q.intent == "follow_trail"]
    assert followed == []  # names found on a depth-2 page would be depth 3 > max_trail_depth
    shallow = (await engine.reflect(_context(facts, [temple], [], 2, {"shirley temple": 1}))).value
    assert any(q.intent == "follow_trail" for q in shallow.response.new_queries)
    for trail_query in (q.query for q in shallow.response.new_queries):
        repeat = (
            await engine.reflect(_context(facts, [temple], [trail_query.upper()], 2, {"shirley temple": 1}))
        ).value
        assert query_signature(trail_query) not in {query_signature(q.query) for q in repeat.response.new_queries}


async def test_reflect_is_sufficient_when_slots_filled_and_no_new_facts() -> None:
    engine = OfflineEngine()
    question = "Who directed Maximum Overdrive?"
    page = source(
        "file:///h.jsonl#9",
        "Maximum Overdrive",
        (
            "Maximum Overdrive is a 1986 American science fiction horror comedy film written and directed by "
            "Stephen King. The film stars Emilio Estevez, Pat Hingle and Laura Harrington."
        ),
    )
    facts = (await engine.extract(question, page, 1)).value.facts
    context = ReflectionContext(
        query=question,
        domain="general",
        iteration=2,
        max_queries=3,
        facts=facts,
        entities=[],
        sources=[page],
        queries_run=["Maximum Overdrive directed"],
        failed_queries=["Maximum Overdrive directed"],
    )
    outcome = (await engine.reflect(context)).value
    assert outcome.slots == {"answer": True}
    assert outcome.response.sufficient and outcome.response.confidence > 0.5


async def test_synthesize_cites_only_given_numbers_and_survives_the_citation_check() -> None:
    engine = OfflineEngine()
    temple = source("file:///h.jsonl#2", "Shirley Temple", SHIRLEY_TEMPLE, query="Shirley Temple government position")
    sources = {s.url: s for s in (KISS, RADIO, temple)}
    facts = cross_verify(await _facts(engine, [KISS, RADIO], 1) + await _facts(engine, [temple], 2), sources, 0.6)
    numbered = [NumberedSource(n=i, source=s) for i, s in enumerate((temple, KISS), start=1)]
    request = SynthesisInput(
        query=QUESTION, sources=numbered, facts=facts, max_findings=4, stop_reason="max_execution_time"
    )
    draft = (await engine.synthesize(request)).value
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", draft.answer)}
    assert cited == {1, 2}  # both hops of the chain are in the answer
    sentences = [s for s in re.split(r"(?<=[.!])\s+", draft.answer.split("\n\n")[0]) if s]
    assert 2 <= len(sentences) <= 5
    first = re.split(r"(?<=\])[.!]", draft.answer)[0]
    assert first.endswith("[1]")  # the second hop's page (the actress's own) leads
    assert "Shirley Temple as Corliss Archer" in draft.answer  # with the sentence that links to it
    assert "stopped early" not in draft.answer  # the sources answered: stopping at the time limit cost nothing
    assert 1 <= len(draft.findings) <= 4
    by_id = {f.id: f for f in facts}
    assert all(Fact.make_id(f.statement) in by_id for f in draft.findings)
    assert all(set(f.citations) <= {1, 2} for f in draft.findings)
    assert not any("Not found in the sources" in g for g in draft.gaps)  # the answer fills what the question asks
    checked = check_citations(draft, numbered)
    assert checked.removed_unresolvable == checked.removed_unsupported == checked.sentences_dropped == 0
    assert (await engine.synthesize(request)).value == draft  # deterministic


async def test_synthesize_without_facts_says_so_and_reports_degraded_mode() -> None:
    request = SynthesisInput(
        query=QUESTION, sources=[], facts=[], degraded_mode=True, stop_reason="all_providers_failed"
    )
    draft = (await OfflineEngine().synthesize(request)).value
    assert draft.findings == [] and "do not answer this question" in draft.answer and "Degraded mode" in draft.answer
    assert draft.answered is False and draft.short_answer is None
    assert not re.search(r"\[\d+\]", draft.answer)
    assert check_citations(draft, []).draft.answer == draft.answer  # notes are editorial, never dropped
