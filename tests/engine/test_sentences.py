from research_tool.engines.text.sentences import split_sentences
from tests.engine.corpus_texts import SHIRLEY_TEMPLE, SUBPROCESS_DOC


def test_offsets_are_exact_and_abbreviations_survive() -> None:
    text = (
        "Dr. J. R. R. Tolkien taught at Oxford in the U.S. sense of the word, e.g. as a professor. "
        "Python 3.11 made CPython faster. Call `subprocess.run()` to start a process! Does it block? Yes."
    )
    sentences = split_sentences(text)
    assert [s.text for s in sentences] == [
        "Dr. J. R. R. Tolkien taught at Oxford in the U.S. sense of the word, e.g. as a professor.",
        "Python 3.11 made CPython faster.",
        "Call `subprocess.run()` to start a process!",
        "Does it block?",
        "Yes.",
    ]
    assert all(text[s.start : s.end] == s.text for s in sentences)


def test_dates_in_parentheses_and_urls_do_not_split() -> None:
    sentences = split_sentences(SHIRLEY_TEMPLE + " See https://example.org/a.b.html for more.")
    assert sentences[0].text.startswith("Shirley Temple Black (April 23, 1928")
    assert sentences[0].text.endswith("from 1935 to 1938.")
    assert sentences[-1].text == "See https://example.org/a.b.html for more."


def test_blank_lines_headings_bullets_and_code_fences_end_sentences() -> None:
    text = "# Install\nRun the installer\n\n- first item\n- second item\n\n```\nx = 1. y = 2\n```\nAfter code."
    texts = [s.text for s in split_sentences(text)]
    assert "Run the installer" in texts
    assert "first item" in texts and "second item" in texts
    assert not any("x = 1" in t for t in texts)
    assert texts[-1] == "After code."


def test_wrapped_documentation_lines_stay_one_sentence() -> None:
    texts = [s.text for s in split_sentences(SUBPROCESS_DOC)]
    assert texts[0].startswith("subprocess.run(args")  # the signature is its own unit
    wrapped = next(t for t in texts if t.startswith("Wait for the command"))
    assert wrapped.endswith("CompletedProcess instance.") and "\n" in wrapped


def test_a_footnote_after_the_full_stop_closes_its_sentence() -> None:
    text = "The club won twice.[citation needed] The team played on.[3] It moved in 1990.[note 2] It closed."
    assert [s.text for s in split_sentences(text)] == [
        "The club won twice.[citation needed]",
        "The team played on.[3]",
        "It moved in 1990.[note 2]",
        "It closed.",
    ]
