from research_tool.engines.offline import extract_source
from research_tool.engines.text.entities import (
    classify_by_definition,
    clean_title,
    extract_entities,
    find_mentions,
    is_sentence_case_word,
    sentence_case_words,
)
from research_tool.engines.text.keyphrases import build_query, keyphrases, query_signature
from research_tool.engines.text.tokens import stem
from research_tool.models.entities import SourceResult
from tests.engine.corpus_texts import KISS_AND_TELL, SHIRLEY_TEMPLE

QUESTION = "Which government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"


def test_stemming_conflates_inflections() -> None:
    assert stem("portrayed") == stem("portrays") == stem("portraying")
    assert stem("positions") == stem("position")
    assert stem("studies") == stem("study")
    assert stem("subprocess.run") == "subprocess.run" and stem("3.11") == "3.11"


def test_query_from_question_keeps_names_and_drops_question_words() -> None:
    query = build_query(QUESTION)
    assert query.startswith("government position")
    assert "Corliss Archer" in query and "Kiss" in query and "Tell" in query
    assert "Which" not in query and " the " not in f" {query} "


def test_query_signature_ignores_order_case_and_inflection() -> None:
    assert query_signature("Shirley Temple government positions") == query_signature(
        "government position shirley temple"
    )
    assert query_signature("Shirley Temple government") != query_signature("Shirley Temple ambassador")


def test_keyphrases_keep_names_whole() -> None:
    phrases = {k.phrase for k in keyphrases(QUESTION)}
    assert "Corliss Archer" in phrases and "Kiss and Tell" in phrases
    assert "government position" in phrases


def test_mentions_have_types() -> None:
    found = {(m.text, m.entity_type) for m in find_mentions(KISS_AND_TELL + " " + SHIRLEY_TEMPLE)}
    assert ("Shirley Temple", "person") in found
    assert ("April 23, 1928", "date") in found
    assert ("Kiss and Tell", "other") in found
    assert ("Corliss Archer", "other") in found
    text = "Call subprocess.run() with check=True or use check_output() to capture 5 MB of output for $3.5 million."
    code = {(m.text, m.entity_type) for m in find_mentions(text)}
    assert ("subprocess.run", "concept") in code and ("check_output()", "concept") in code
    assert ("5 MB", "number") in code and ("$3.5 million", "number") in code


def test_conjoined_names_split_but_titles_with_and_stay_whole() -> None:
    names = [m.text for m in find_mentions("Are Petra Lindqvist and Omar Haddad both directors of Kiss and Tell?")]
    assert names == ["Petra Lindqvist", "Omar Haddad", "Kiss and Tell"]


def test_definition_sentence_types_the_document_subject() -> None:
    assert classify_by_definition("Shirley Temple", SHIRLEY_TEMPLE) == "person"
    assert classify_by_definition("Kiss and Tell", KISS_AND_TELL) == "work"
    assert classify_by_definition("Marlow", "Marlow is a town in Orla County, on the river Sava.") == "place"
    assert clean_title("Kiss and Tell (1945 film)") == "Kiss and Tell"


def test_extract_entities_merges_by_key() -> None:
    entities = extract_entities("Shirley Temple met Shirley Temple's fans in Ghana.", "file:///x", 1)
    keys = [e.key for e in entities]
    assert keys.count("shirley temple") == 1
    assert all(e.sources == ["file:///x"] and e.iteration == 1 for e in entities)


def test_stemming_folds_accents_and_irregular_past_forms() -> None:
    assert stem("Temüjin") == stem("Temujin") and stem("Céloron") == stem("Celoron")
    assert stem("came") == stem("comes") and stem("held") == stem("holds")
    assert stem("led") == stem("leads") and stem("won") == stem("wins")
    assert stem("rose") != stem("rise")  # also a flower and a name: left alone


def test_the_words_between_two_double_backquoted_names_are_no_entity() -> None:
    text = "If ``loader_hook`` is also given, the ``pair_hook`` wins over it."
    names = {e.name for e in extract_entities(text, "file:///notes.txt", 0)}
    assert "loader_hook" in names and "pair_hook" in names
    assert not any(name != name.strip() or "also given" in name for name in names)


def test_a_docstring_phrase_about_a_code_literal_is_no_entity() -> None:
    text = "Return True if the Garden Gate is open. Defaults to None when Mira Holt set no gate."
    names = {e.name for e in extract_entities(text, "file:///notes.txt", 0)}
    assert "Garden Gate" in names and "Mira Holt" in names
    assert not any("True" in name or "None" in name for name in names)


def test_a_word_capitalised_only_where_a_sentence_opens_is_no_entity_to_list() -> None:
    statements = [
        "Called when the kettle boils over.",
        "The handler is called once per kettle, and Brindle logs it.",
        "Brindle keeps the kettle warm. Executes the plan quietly.",
    ]
    common = sentence_case_words(statements)
    assert is_sentence_case_word("Called", common)  # "called" in lower case, never capitalised mid-sentence
    assert not is_sentence_case_word("Brindle", common)  # a name: capitalised mid-sentence
    assert not is_sentence_case_word("Executes", common)  # never written in lower case: kept (no evidence)
    assert not is_sentence_case_word("Called Back", common)  # several words: a title, not a sentence opening


def test_a_reference_pages_subject_is_its_name_without_the_summary_after_the_dash() -> None:
    page = SourceResult(
        url="file:///docs/kettle.html",
        title="kettle.boil \u2014 Boil water in the kettle.",
        source_name="local",
        full_content="kettle.boil(litres) heats the water until it boils.",
    )
    result = extract_source("How do I boil water?", page, 1, max_facts=5)
    assert "kettle.boil" in [e.name for e in result.entities]
    assert not any("\u2014" in e.name for e in result.entities)
