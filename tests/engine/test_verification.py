from research_tool.engines.text.facts import extract_facts
from research_tool.graph.decisions.verification import cross_verify, source_credibility, witness_key
from research_tool.models.entities import Evidence, Fact
from tests.engine.corpus_texts import KISS_AND_TELL, SHIRLEY_TEMPLE, SUBPROCESS_DOC, SUBPROCESS_MIRROR, source

TIMEOUT = "If the timeout expires, the child process will be killed and waited for."


def _fact(statement: str, url: str, subject: str | None = None, relevance: float = 0.6) -> Fact:
    return Fact(
        id=Fact.make_id(statement),
        statement=statement,
        subject=subject,
        relevance=relevance,
        evidence=[Evidence(source_url=url, quote=statement)],
    )


def test_witnesses_are_registered_domains_or_documents() -> None:
    assert witness_key("https://docs.python.org/3/library/subprocess.html") == "python.org"
    assert witness_key("https://www.python.org/about/") == "python.org"
    assert witness_key("https://news.bbc.co.uk/a") == witness_key("https://www.bbc.co.uk/b") == "bbc.co.uk"
    assert witness_key("file:///c/docs.jsonl#1") != witness_key("file:///c/docs.jsonl#2")


def test_two_independent_sources_verify_a_fact_found_in_only_one() -> None:
    sources = {
        "file:///pydoc/subprocess.txt": source("file:///pydoc/subprocess.txt", "subprocess", SUBPROCESS_DOC),
        "https://example.org/notes": source("https://example.org/notes", "Notes", SUBPROCESS_MIRROR, "tavily"),
    }
    fact = extract_facts("subprocess run timeout expires", sources["file:///pydoc/subprocess.txt"], 1)
    timeout = [f for f in fact if f.statement == TIMEOUT]
    assert timeout
    checked = {f.id: f for f in cross_verify(fact, sources, threshold=0.6)}
    verified = checked[timeout[0].id]
    assert verified.verified
    assert {e.source_url for e in verified.evidence} == set(sources)
    mirror_quote = next(e.quote for e in verified.evidence if e.source_url == "https://example.org/notes")
    assert mirror_quote in SUBPROCESS_MIRROR  # the supporting sentence is quoted exactly
    unverified = [f for f in checked.values() if len(f.source_urls) == 1]
    assert unverified and not any(f.verified for f in unverified)
    assert verified.confidence > max(f.confidence for f in unverified)


def test_same_text_on_one_site_is_not_independent() -> None:
    urls = ["https://docs.example.com/a", "https://mirror.example.com/b"]
    sources = {u: source(u, "Notes", SUBPROCESS_MIRROR, "tavily") for u in urls}
    facts = [_fact(TIMEOUT, urls[0]), _fact(TIMEOUT, urls[1])]
    (merged,) = cross_verify(facts, sources, threshold=0.5)
    assert len(merged.evidence) == 2 and not merged.verified


def test_near_duplicates_merge_and_keep_all_evidence() -> None:
    a = _fact("Shirley Temple was named United States ambassador to Ghana.", "https://a.org/x", relevance=0.7)
    b = _fact("Shirley Temple was named United States ambassador to Ghana!", "https://b.org/y", relevance=0.5)
    c = _fact("Kiss and Tell is a 1945 American comedy film.", "https://a.org/x")
    sources = {
        u: source(u, "t", SHIRLEY_TEMPLE + " " + KISS_AND_TELL, "tavily")
        for u in ("https://a.org/x", "https://b.org/y")
    }
    merged = cross_verify([a, b, c], sources, threshold=0.5)
    assert len(merged) == 2
    ambassador = next(f for f in merged if "Ghana" in f.statement)
    assert ambassador.id == a.id and ambassador.source_urls == ["https://a.org/x", "https://b.org/y"]
    assert ambassador.verified and ambassador.relevance == 0.7


def test_contradictions_by_number_and_by_negation() -> None:
    sources = {u: source(u, "Acme", "", "tavily") for u in ("https://a.com/1", "https://b.com/2", "https://c.com/3")}
    facts = [
        _fact("Acme Corp had 1,200 employees at the end of 2020.", "https://a.com/1", "Acme Corp"),
        _fact("Acme Corp had 950 employees at the end of 2020.", "https://b.com/2", "Acme Corp"),
        _fact("Acme Corp is listed on the New York Stock Exchange.", "https://a.com/1", "Acme Corp"),
        _fact("Acme Corp is not listed on the New York Stock Exchange.", "https://c.com/3", "Acme Corp"),
        _fact("The population was 13,527 at the 2010 census.", "https://a.com/1", "Leland"),
        _fact("The population was 1,938 at the 2000 census.", "https://b.com/2", "Leland"),
    ]
    checked = {f.statement: f for f in cross_verify(facts, sources, threshold=0.5)}
    many, few = checked[facts[0].statement], checked[facts[1].statement]
    assert many.contradictions == [few.id] and few.contradictions == [many.id]
    listed, unlisted = checked[facts[2].statement], checked[facts[3].statement]
    assert listed.contradictions == [unlisted.id] and unlisted.contradictions == [listed.id]
    assert not checked[facts[4].statement].contradictions  # two censuses, two times: no conflict
    assert many.confidence < checked[facts[4].statement].confidence + 0.2


def test_credibility_by_provider_type() -> None:
    def s(name: str) -> float:
        return source_credibility(source("https://x.org", "t", "", name))

    assert s("semantic_scholar") > s("wikipedia") > s("tavily")
    assert s("local") > s("duckduckgo")


def test_linked_document_inherits_relevance() -> None:
    sources = {
        "file:///h#1": source("file:///h#1", "Kiss and Tell (1945 film)", KISS_AND_TELL),
        "file:///h#2": source("file:///h#2", "Shirley Temple", SHIRLEY_TEMPLE),
    }
    link = _fact(
        "Kiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer.",
        "file:///h#1",
        relevance=0.8,
    )
    target = _fact("She began her film career in 1932 at the age of three.", "file:///h#2", relevance=0.1)
    checked = {f.id: f for f in cross_verify([link, target], sources, threshold=0.6)}
    assert checked[target.id].relevance >= 0.6
    again = {f.id: f for f in cross_verify(list(checked.values()), sources, threshold=0.6)}
    assert again[target.id].relevance == checked[target.id].relevance  # idempotent across cycles


def test_template_sentences_about_two_different_subjects_are_two_facts() -> None:
    """Same wording, different named things: neither page verifies the other's sentence."""
    otter = "The 2019–20 Otterburn Rovers rowing team represented Otterburn College in the northern league."
    heron = "The 2019–20 Heronsgate Rovers rowing team represented Heronsgate College in the northern league."
    sources = {
        "file:///teams.jsonl#otter": source("file:///teams.jsonl#otter", "Otterburn Rovers", otter),
        "file:///teams.jsonl#heron": source("file:///teams.jsonl#heron", "Heronsgate Rovers", heron),
    }
    facts = [_fact(otter, "file:///teams.jsonl#otter"), _fact(heron, "file:///teams.jsonl#heron")]
    checked = cross_verify(facts, sources, threshold=0.5)
    assert len(checked) == 2
    for fact in checked:
        assert len(fact.source_urls) == 1 and not fact.verified


def test_sentences_that_differ_in_a_number_word_are_two_facts() -> None:
    """ "The second single" and "the fourth single" of one album: neither page verifies the other."""
    second = "The song was released as the second single from the band's debut album, Lanterns, in 1999."
    fourth = "The song was released as the fourth single from the band's debut album, Lanterns, in 1999."
    sources = {
        "file:///songs.jsonl#a": source("file:///songs.jsonl#a", "Harbour Song", second),
        "file:///songs.jsonl#b": source("file:///songs.jsonl#b", "River Song", fourth),
    }
    facts = [_fact(second, "file:///songs.jsonl#a"), _fact(fourth, "file:///songs.jsonl#b")]
    checked = cross_verify(facts, sources, threshold=0.5)
    assert len(checked) == 2
    for fact in checked:
        assert len(fact.source_urls) == 1 and not fact.verified
