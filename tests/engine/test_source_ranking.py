"""Which sources the report draws on: title links between pages, never between chunks of one document."""

from __future__ import annotations

from research_tool.engines.text.tokens import stem_set
from research_tool.graph.decisions.source_ranking import (
    howto_query_weight,
    named_in_question,
    propagate_links,
    query_weight,
    rank_sources,
)
from research_tool.models.entities import Evidence, Fact


def test_chunks_sharing_a_title_pass_no_score_to_each_other() -> None:
    sources = {
        "p1": {"title": "Tolt River", "full_content": "The Tolt River drains the Varn hills."},
        "p2": {"title": "Tolt River", "full_content": "Its delta is wide."},
        "p3": {"title": "Varn hills", "full_content": "Low hills of chalk."},
    }
    linked = propagate_links({"p1": 1.0, "p2": 0.2, "p3": 0.1}, sources)
    assert linked["p2"] == 0.2  # the other chunk of "Tolt River" is named in p1's text but gains nothing
    assert linked["p3"] > 0.1  # a different page named in p1's text still inherits


def test_a_how_to_question_cites_the_api_page_its_words_spell_even_without_facts() -> None:
    sources = {
        "a": {"title": "zipper.pack — Describe packed archives.", "full_content": "Describe packed archives."},
        "b": {"title": "zipper.ArchiveUnpacker", "full_content": "zipper.ArchiveUnpacker(f)"},
        "c": {"title": "Unpacking archives", "full_content": "An essay."},
    }
    text = "Describe packed archives."
    fact = Fact(id="f1", statement=text, evidence=[Evidence(source_url="a", quote=text)])
    calls = [{"query": "unpack archive", "urls": ["a", "c", "b"]}]
    chosen = rank_sources("How do I unpack an archive?", calls, [fact], 2, sources)
    assert chosen[0] == "b"  # no fact of its own, but its name is the answer
    assert "c" not in chosen  # a page without facts whose title names no API stays out
    assert rank_sources("Who unpacked the archive?", calls, [fact], 2, sources) == ["a"]


def test_a_how_to_question_ranks_what_its_whole_words_find_above_what_a_pair_alone_finds() -> None:
    sources = {u: {"title": f"Notes {u}", "full_content": "Plain notes."} for u in ("w", "p")}
    facts = [
        Fact(id=f"f{u}", statement=f"Notes {u}.", evidence=[Evidence(source_url=u, quote=f"Notes {u}.")])
        for u in ("w", "p")
    ]
    calls = [
        {"query": "bake bread oven steam", "urls": ["w"]},
        {"query": "bake oven", "urls": ["p"]},
    ]
    assert rank_sources("How do I bake bread in an oven with steam?", calls, facts, 2, sources) == ["w", "p"]
    # any other question weighs a query only by the share of its own words that come from the question
    stems = stem_set("How do I bake bread in an oven with steam?")
    assert query_weight("bake oven", stems) == query_weight("bake bread oven steam", stems) == 1.0
    assert howto_query_weight("bake oven", stems) == 0.5


def test_a_page_the_question_names_by_title_is_not_outvoted_by_pages_many_queries_meet() -> None:
    sources = {
        "named": {"title": "Tolt Harbour (port)", "full_content": "Tolt Harbour is a port."},
        "busy": {"title": "Varn hills", "full_content": "Low hills."},
        "amp": {"title": "Salt &amp; Pepper", "full_content": "A duo."},
    }
    facts = [
        Fact(id=f"f{u}", statement=f"Notes {u}.", evidence=[Evidence(source_url=u, quote=f"Notes {u}.")])
        for u in sources
    ]
    # the busy page is met by every follow-up query; the named page by one
    calls = [{"query": f"founded hills {i}", "urls": ["busy"]} for i in range(6)]
    calls.append({"query": "founded Tolt Harbour", "urls": ["amp", "named"]})
    chosen = rank_sources("Who founded Tolt Harbour?", calls, facts, 3, sources)
    assert chosen[0] == "named"
    assert named_in_question("Did Salt & Pepper found Tolt Harbour?", "Salt &amp; Pepper")
    assert not named_in_question("Who founded Tolt Harbours Trust?", "Tolt Harbour")  # whole words only
