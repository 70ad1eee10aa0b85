"""The report's entity list holds names only, typed (issue 41): no heading, question, fragment, CONSTANT or
capitalised common word; weekdays, products, people and places typed; mentions counted."""

from __future__ import annotations

from typing import Any, cast

from research_tool.engines.offline import extract_source
from research_tool.engines.text.entities import extract_entities, is_title_name
from research_tool.eval.report_audit import entity_problem, lowercase_words
from research_tool.graph.report_assembly import build_entities
from research_tool.models.entities import SourceResult
from research_tool.models.state import ResearchState, merge_entities


def _typed(text: str, document: str = "") -> dict[str, str]:
    return {e.name: e.entity_type for e in extract_entities(text, "file:///notes.md", 1, document=document)}


def test_weekdays_months_and_holidays_are_dates_and_not_glued_to_a_heading() -> None:
    found = _typed("Collections on Monday are not affected.\nThe shop shuts at Christmas and on Sundays in March.")
    assert found == {"Monday": "date", "Christmas": "date", "Sundays": "date", "March": "date"}


def test_a_name_never_runs_across_a_line_break() -> None:
    text = "Silver Tide - Ffion Marchbank\nThe Owl and the Moon - Alys Trewent\nHaul Away - traditional"
    names = set(_typed(text))
    assert "Ffion Marchbank" in names and "Alys Trewent" in names
    assert not any("Marchbank The" in n or "Trewent Haul" in n for n in names)


def test_people_organisations_and_places_are_typed_by_cues() -> None:
    text = (
        "Dr Anjali Pellow saw Corwen Hale at Tidemark Lettings, near Brackenford.\n"
        "The poem is by the writer Annis Quorle."
    )
    found = _typed(text)
    assert "person" in (found.get("Anjali Pellow"), found.get("Dr Anjali Pellow"))
    assert found["Corwen Hale"] == "person"
    assert found["Tidemark Lettings"] == "organization"
    assert found["Brackenford"] == "place"
    assert found["Annis Quorle"] == "person"


def test_code_and_products_are_concepts_and_constants_or_expressions_are_none() -> None:
    text = 'Install it with `pip install gorsefly` and pass `lock="file"`; Redis and SQLite work, as does the API.'
    found = _typed(text)
    assert found.get("Redis") == "concept" and found.get("SQLite") == "concept" and found.get("API") == "concept"
    assert not any("pip install" in n or "lock=" in n for n in found)
    assert _typed("The flag GEN_RUNNING is set.") == {}


def test_capitalised_common_words_and_headings_are_no_names() -> None:
    document = (
        "# Our rooms\n\nEvery room has a kettle. Rubbish goes in the grey bin, and rubbish bags are free.\n\n"
        "Hotel Marrowby is run by Isla Brennock."
    )
    found = _typed(
        "Rubbish goes in the grey bin, and rubbish bags are free.\nHotel Marrowby is run by Isla Brennock.", document
    )
    assert "Rubbish" not in found
    assert found["Hotel Marrowby"] == "organization" and found["Isla Brennock"] == "person"


def test_a_table_rows_column_headers_and_cell_openings_are_no_names() -> None:
    rows = "Family room: Price £95; Breakfast Included.\nSingle room: Price £60; Breakfast Extra."
    found = _typed(rows, rows)
    assert "Price" not in found and "Breakfast" not in found and "Included" not in found


def test_a_local_files_title_is_listed_only_when_it_is_a_name() -> None:
    body = "Hotel Marrowby stands above the harbour. Guests of Hotel Marrowby park on the quay."
    assert is_title_name("Hotel Marrowby", body)
    assert not is_title_name("Our rooms", body)
    assert not is_title_name("Questions about HomeSure Contents", body)
    assert not is_title_name("Notebook, April 2024", body)
    assert not is_title_name("Can I pay by card?", body)
    assert not is_title_name("HOUSE RULES", body)
    heading = SourceResult(
        url="file:///notes/germination.md",
        title="Germination",
        source_name="local",
        full_content="# Germination\n\nSeeds need warmth. Germination takes a week; germination is slow in cold soil.",
    )
    assert "Germination" not in [e.name for e in extract_source("How long do seeds take?", heading, 1, 5).entities]


def test_mentions_count_the_times_the_sources_name_an_entity() -> None:
    page = SourceResult(
        url="file:///notes/mill.txt",
        title="mill",
        source_name="local",
        full_content="Orla Venn built the mill. Orla Venn sold it in 1890. Later Orla Venn moved to Skerrow.",
    )
    found = {e.name: e for e in extract_source("Who built the mill?", page, 1, 5).entities}
    assert found["Orla Venn"].mention_count == 3
    left = {"orla venn": {**found["Orla Venn"].model_dump(mode="json")}}
    right = {"orla venn": {**left["orla venn"], "sources": ["file:///notes/other.txt"], "mention_count": 2}}
    merged = merge_entities(left, right)
    assert merged["orla venn"]["mention_count"] == 5
    assert merge_entities(merged, right) == merged  # merging the same update again counts it once
    state = cast(ResearchState, {"facts": {}, "entities": merged})
    assert [(e.mentions, e.sources) for e in build_entities(state)] == [(5, 2)]


def test_a_one_word_name_takes_the_type_of_the_longer_name_it_is_part_of() -> None:
    def entity(name: str, entity_type: str) -> dict[str, Any]:
        return {"name": name, "entity_type": entity_type, "sources": ["file:///a"], "mention_count": 1}

    entities = {
        "ffion marchbank": entity("Ffion Marchbank", "person"),
        "ffion": entity("Ffion", "other"),
        "tidemark lettings": entity("Tidemark Lettings", "organization"),
        "tidemark": entity("Tidemark", "other"),
        "our team": entity("Our team", "organization"),
        "can i pay by card": entity("Can I pay by card?", "other"),
    }
    state = cast(ResearchState, {"facts": {}, "entities": entities})
    listed = {e.name: e.type for e in build_entities(state)}
    assert listed == {
        "Ffion Marchbank": "person",
        "Ffion": "person",
        "Tidemark Lettings": "organization",
        "Tidemark": "organization",
    }


def test_the_audit_reads_code_and_addresses_as_no_prose() -> None:
    texts = [
        "Install with `pip install redis`.\n\n```python\nimport redis\n```\n\nThe Redis backend is fast, and Redis "
        "keeps the rubbish list. See https://example.test/python for more."
    ]
    common = lowercase_words(texts)
    assert "redis" not in common and "python" not in common
    assert "rubbish" in common


def test_the_audit_takes_an_amount_with_a_thousands_comma_for_a_name_but_not_a_phrase_with_one() -> None:
    assert entity_problem("3,000 people", frozenset(), frozenset()) is None
    assert entity_problem("Notebook, April 2024", frozenset(), frozenset()) == "fragment"


def test_a_common_word_in_capitals_is_no_name_but_an_acronym_or_a_class_is_one() -> None:
    document = (
        "Pass the pipe to the reader. To cancel, reply with CANCEL or open the URL; the url argument takes TarInfo."
    )
    found = _typed(document, document)
    assert "CANCEL" not in found and found.get("URL") == "concept" and found.get("TarInfo") == "concept"
    common = lowercase_words([document])
    assert entity_problem("URL", common, frozenset()) is None and entity_problem("TarInfo", common, frozenset()) is None
    assert entity_problem("Pipe", common, frozenset()) == "common word"


def test_an_opening_verb_and_article_glued_to_a_name_are_cut_off_and_indented_or_listed_openers_are_none() -> None:
    assert set(_typed("- Add the Marrowby flag.")) == {"Marrowby"}
    assert _typed("Send the URL- and go.") == {"URL": "concept"}
    assert _typed("    Determines the size of the buffer.") == {}
    # a definition list's description and a title's summary open after a dash
    assert _typed("    - exit_on_error -- Determines whether the parser exits.") == {"exit_on_error": "concept"}
    assert _typed("tarfile.open — Return a TarFile object for the path.") == {
        "tarfile.open": "concept",
        "TarFile": "concept",
    }


def test_a_constant_in_capitals_and_a_verb_opening_before_a_code_name_are_no_names() -> None:
    assert _typed("Pass WNOHANG to return at once.") == {}
    assert _typed("Raise KeyError when the key is missing.") == {"KeyError": "concept"}
    assert _typed("The Force is strong.").get("Force") != "organization"  # a cue word alone names no organization


def test_one_untyped_word_the_document_also_writes_in_lower_case_is_no_name() -> None:
    document = "Put glass in the Blue Box. The blue lid is for paper. Ask in the Hall; the hall opens at nine."
    found = _typed(document, document)
    assert "Blue" not in found and "Hall" not in found and "Blue Box" in found
