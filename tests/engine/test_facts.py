from research_tool.engines.text.facts import (
    clean_statement,
    extract_facts,
    extraction_quality,
    is_declarative,
)
from research_tool.models.entities import Fact
from tests.engine.corpus_texts import CORLISS_ARCHER_RADIO, KISS_AND_TELL, SHIRLEY_TEMPLE, SUBPROCESS_DOC, source

QUESTION = "Which government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
LONG_PAGE = " ".join(
    [KISS_AND_TELL]
    + [f"The studio archive lists reel {i} of the print as restored in the year {1990 + i}." for i in range(30)]
)


def test_facts_are_exact_quotes_with_source_and_id() -> None:
    page = source("file:///films.jsonl#1", "Kiss and Tell (1945 film)", KISS_AND_TELL)
    facts = extract_facts(QUESTION, page, iteration=1)
    assert facts, "the sentence naming Corliss Archer must be extracted"
    best = facts[0]
    assert "Shirley Temple as Corliss Archer" in best.statement
    assert best.evidence[0].source_url == "file:///films.jsonl#1"
    assert best.evidence[0].quote in KISS_AND_TELL
    assert best.id == Fact.make_id(best.statement)
    assert best.iteration == 1 and best.relevance > 0.4


def test_long_document_is_capped_to_its_most_relevant_sentences() -> None:
    page = source("file:///long#1", "Kiss and Tell (1945 film)", LONG_PAGE)
    facts = extract_facts(QUESTION, page, iteration=1, max_facts=3)
    assert 1 <= len(facts) <= 4  # the cap, plus at most the defining lead sentence
    assert "Corliss Archer" in facts[0].statement
    assert facts == sorted(facts, key=lambda f: -f.relevance)


def test_query_that_found_the_source_counts_for_relevance() -> None:
    cold = source("file:///p#2", "Shirley Temple", SHIRLEY_TEMPLE)
    trail = source(
        "file:///p#2", "Shirley Temple", SHIRLEY_TEMPLE, query="Shirley Temple government position ambassador"
    )
    best_cold = max(f.relevance for f in extract_facts(QUESTION, cold, 2))
    ambassador = [f for f in extract_facts(QUESTION, trail, 2) if "ambassador" in f.statement]
    assert ambassador and ambassador[0].relevance > best_cold * 0.9
    assert ambassador[0].subject == "Shirley Temple"  # "she was named ..." is about the page's subject


def test_documentation_text_is_cleaned_and_signatures_skipped() -> None:
    doc = source("file:///pydoc/subprocess.txt", "subprocess", SUBPROCESS_DOC)
    facts = extract_facts("What happens when a subprocess.run timeout expires?", doc, 1)
    statements = [f.statement for f in facts]
    assert any(s.startswith("If the timeout expires, the child process will be killed") for s in statements)
    assert not any(s.startswith("subprocess.run(args") for s in statements)
    assert all("\n" not in s and "  " not in s for s in statements)


def test_declarative_filter_and_quality() -> None:
    assert is_declarative("Meet Corliss Archer is an American radio sitcom that ran on CBS from 1943 to 1956.")
    assert not is_declarative("What is Corliss Archer?")
    assert not is_declarative("Accept all cookies to subscribe to our newsletter today please.")
    assert not is_declarative("Kiss and Tell")
    assert clean_statement("It was a hit.[3] It\n    ran long [citation needed].") == "It was a hit. It ran long."
    # a bracket inside the sentence may be the text's own: the statement stays the source's words
    assert clean_statement('Kenyatta was "[a]ccompanied by 60 people".') == 'Kenyatta was "[a]ccompanied by 60 people".'
    assert clean_statement("The ring Z[i] is a domain.[a]") == "The ring Z[i] is a domain."
    assert clean_statement("It aired in 1996[note 2] and ran on.[when?]") == "It aired in 1996[note 2] and ran on."
    assert extraction_quality("It may possibly have been released.") < extraction_quality(
        CORLISS_ARCHER_RADIO.split(". ")[0] + "."
    )


def test_a_footnote_inside_closing_brackets_stays() -> None:
    # "x[citation needed])." without its note would read "x)." which the source never says
    assert clean_statement("It ran (as spin-offs[citation needed]).") == "It ran (as spin-offs[citation needed])."


def test_a_sheet_row_read_as_a_sentence_states_its_values() -> None:
    """A sheet or table row ("Wexley Green: Bikes 17; Docks 24.") names more than it says in words, and failed the
    three-lowercase-words test of a statement: an .xlsx or .csv fact was never answered (issue 42)."""
    from research_tool.engines.text.facts import is_table_row, score_sentences
    from research_tool.models.entities import SourceResult

    row = "Wexley Green: Bikes 17; Docks 24."
    assert is_table_row(row) and not is_declarative(row)
    source = SourceResult(url="file:///stations.csv#row-2", title="stations.csv, row 2", source_name="local",
                          full_content=row)  # fmt: skip
    scored = score_sentences("How many bikes are at the Wexley Green station?", source)
    assert [s.statement for s in scored] == [row]
