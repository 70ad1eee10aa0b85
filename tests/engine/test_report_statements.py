"""Issue 41: every statement a report makes around its lead is true and about the question. A short answer is the
asked kind of value from the clause the question is about, a yes/no verdict comes from a sentence that states what is
asked, a question naming what no source mentions is not answered, gaps never name what the answer fills, and
findings off the question carry no mark. Small folders written for these tests; the reader is a small function
that likes one sentence (the trained one has its own tests)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from research_tool.engines.base import NumberedSource, SynthesisInput
from research_tool.engines.offline import OfflineEngine
from research_tool.engines.text.answer_parts import unanswered_parts
from research_tool.engines.text.answering import AnswerSelection, select_answer
from research_tool.graph.report_assembly import question_first, single_source_gap
from research_tool.models.entities import SourceResult
from research_tool.models.report import Finding
from research_tool.reporting.export import render_report
from tests.test_export import make_citation, make_report


def folder(*pages: tuple[str, str]) -> list[NumberedSource]:
    return [
        NumberedSource(
            n=i,
            source=SourceResult(url=f"file:///f/{i}.md", title=title, source_name="local", full_content=text),
        )
        for i, (title, text) in enumerate(pages, start=1)
    ]


def liking(words: str) -> object:
    """A reader that finds the sentence holding `words` very likely to answer, and every other one unlikely."""

    def read(question: str, passages: Sequence[tuple[str, str]]) -> list[float]:
        return [0.95 if words in sentence else 0.02 for sentence, _ in passages]

    return read


def ask(question: str, pages: list[NumberedSource], likes: str) -> AnswerSelection:
    return select_answer(question, pages, reader=liking(likes))  # type: ignore[arg-type]


FARES = folder(
    (
        "Kestrel Valley Railway fares",
        "Our trains run every Saturday from April to October. "
        "An adult return ticket costs 28 pounds and a child return ticket costs 14 pounds. "
        "Dogs travel free.",
    )
)


def test_a_short_answer_is_never_the_other_subject_s_value_in_the_same_sentence() -> None:
    selection = ask("How much does a child return ticket cost?", FARES, "An adult return ticket")
    assert selection.answered and selection.sentences[0].statement.startswith("An adult return ticket")
    assert selection.short_answer != "28 pounds"
    assert selection.short_answer in (None, "14 pounds")


def test_a_price_question_gets_money_not_a_distance_or_a_date() -> None:
    pages = folder(("Cake orders", "Delivery within five miles of Sallowby costs 8 pounds, on Fridays only."))
    selection = ask("How much does delivery within five miles cost?", pages, "Delivery within")
    assert selection.answered
    assert selection.short_answer in (None, "8 pounds")
    croissant = folder(("Spring news", "From 1 April a croissant costs £2.60 instead of £2.40."))
    selection = ask("How much is a croissant from April?", croissant, "croissant costs")
    assert selection.short_answer != "1 April"


def test_how_many_counts_the_asked_noun() -> None:
    pages = folder(("Archive", "The museum holds 212 logbooks from nine lighthouses, dating from 1841 to 1968."))
    selection = ask("How many logbooks does the museum hold?", pages, "212 logbooks")
    assert selection.answered and selection.short_answer != "nine"


def test_how_many_is_never_answered_with_a_share() -> None:
    pages = folder(("Club news", "At the summer meeting 45% of members came and voted on the roof."))
    selection = ask("How many members came to the summer meeting?", pages, "summer meeting")
    assert selection.answered and selection.span is not None
    assert selection.short_answer is None or "%" not in selection.short_answer


def test_who_is_never_answered_with_the_place_the_sentence_puts_it_at() -> None:
    at = folder(("Workshops", "The Saturday repair workshop is run at Tollbridge by our mechanics."))
    selection = ask("Who runs the Saturday repair workshop?", at, "repair workshop")
    assert selection.answered and selection.span == "Tollbridge" and selection.short_answer is None
    by = folder(("Workshops", "The Saturday repair workshop is run by Ann Pask at Tollbridge."))
    assert ask("Who runs the Saturday repair workshop?", by, "repair workshop").short_answer == "Ann Pask"


def test_no_short_answer_when_the_lead_or_the_next_sentence_corrects_the_value() -> None:
    pages = folder(("Archive", "The museum holds 212 logbooks from the lighthouses. A recount in 2024 found 214."))
    selection = ask("How many logbooks does the museum hold?", pages, "212 logbooks")
    assert selection.answered and selection.sentences[0].statement.startswith("The museum holds 212")
    assert selection.short_answer is None
    talk = folder(("Programme", "The opening talk was to have been given by Ned Marsh, who is replaced by Ione Pask."))
    selection = ask("Who gives the opening talk?", talk, "opening talk")
    assert selection.answered and selection.short_answer is None


def test_how_many_is_never_answered_with_part_of_a_clock_time() -> None:
    pages = folder(("Programme", "The morning session of talks runs from 9:30 to 11:00 in Hall B."))
    selection = ask("How many talks are there in the morning session?", pages, "morning session")
    assert selection.answered and selection.span == "9" and selection.short_answer is None


def test_which_vet_asks_for_a_person_and_a_weekday_is_no_answer() -> None:
    pages = folder(("Clinic rota", "The cat dental clinic is run by a vet on Thursday."))
    selection = ask("Which vet runs the cat dental clinic?", pages, "dental clinic")
    assert selection.answered and selection.span == "Thursday"
    assert selection.short_answer is None


def test_no_short_answer_from_a_lead_that_leaves_out_what_the_question_asks_about() -> None:
    pages = folder(
        (
            "Wharf Museum",
            "It moved into the old customs house in 1978. The customs house itself was built in 1834.",
        )
    )
    selection = ask("In what year did the museum move into the customs house?", pages, "built in 1834")
    assert selection.sentences and selection.sentences[0].statement.startswith("The customs house itself")
    assert selection.short_answer is None  # "1834" is when it was built, not when the museum moved


def test_a_short_answer_stands_when_the_lead_states_the_question() -> None:
    pages = folder(("Ferries", "The Orla ferry sank on 2 May 1936 off the Vesk reef. It was never raised."))
    selection = ask("When did the Orla ferry sink?", pages, "sank on 2 May 1936")
    assert selection.short_answer == "2 May 1936"


LEISURE = folder(
    (
        "Lark Hill leisure centre",
        "The lido is at the top of Lark Hill and opens in June. "
        "The steam engines burn diesel only since the boiler was replaced. "
        "Winter opening: Wednesday to Sunday, 11:00 to 16:00. "
        "Unused volunteering days do not carry over to the next year.",
    )
)


def test_no_verdict_from_a_sentence_that_does_not_state_what_is_asked() -> None:
    selection = ask("Is there a sauna at the leisure centre?", LEISURE, "The lido")
    assert not selection.answered and selection.verdict is None and selection.short_answer is None
    assert selection.closest  # the closest sentence is still quoted, as such


def test_an_exclusive_alternative_says_no() -> None:
    assert ask("Do the steam engines run on oil?", LEISURE, "diesel only").verdict == "No"
    assert ask("Can I visit on a Monday in winter?", LEISURE, "Wednesday to Sunday").verdict == "No"
    assert ask("Can I visit on a Friday in winter?", LEISURE, "Wednesday to Sunday").verdict == "Yes"


def test_a_sure_reader_lets_one_term_go_unsaid_but_never_the_only_one_asked() -> None:
    pages = folder(("Walks", "The footbridge below the falls reopened in April after the flood repairs."))
    assert ask("Is the footbridge below the falls open again?", pages, "footbridge").verdict == "Yes"
    # "sauna" is all the question asks of the leisure centre (its title words aside): unsaid, so no verdict
    assert ask("Is there a sauna at the leisure centre?", LEISURE, "The lido").verdict is None


def test_a_negated_deciding_sentence_says_no() -> None:
    assert ask("Do unused volunteering days carry over?", LEISURE, "Unused volunteering").verdict == "No"


def test_a_sentence_saying_the_opposite_of_the_question_s_verb_says_no() -> None:
    pages = folder(("Backends", "The memory backend keeps entries in the process and loses them when it exits."))
    assert ask("Does the memory backend keep entries after the process exits?", pages, "memory backend").verdict == (
        "No"
    )


def test_a_question_naming_what_no_source_mentions_is_not_answered_and_says_why() -> None:
    pages = folder(("Wrenfield Dental", "Dr Anjali Sandhollow qualified as a dentist in 1998 in Leeds."))
    selection = ask("When did Dr Felix Arkwell qualify as a dentist?", pages, "qualified as a dentist")
    assert not selection.answered and selection.short_answer is None
    assert selection.reason is not None and "Felix Arkwell" in selection.reason
    # an acronym of a name the sources give is mentioned, and a nationality before a noun only describes
    pages = folder(("Tolt River Authority", "The Tolt River Authority board moved the weir in 1950 to save salmon."))
    assert ask("When did the TRA board move the weir?", pages, "moved the weir").answered
    pages = folder(("Stations", "WJZ-TV of New York City began broadcasting in 1948 from the Hotel Ansonia."))
    assert ask("When did WJZ-TV in NYC begin broadcasting?", pages, "began broadcasting").answered
    pages = folder(("Schools", "About 8 percent of primary pupils in the Philippines attend private schools."))
    assert ask("What share of Filipino primary pupils attend private schools?", pages, "primary pupils").answered


async def test_the_answer_says_why_it_does_not_answer() -> None:
    pages = folder(("Wrenfield Dental", "Dr Anjali Sandhollow qualified as a dentist in 1998 in Leeds."))
    request = SynthesisInput(query="When did Dr Felix Arkwell qualify as a dentist?", sources=pages, facts=[])
    draft = (await OfflineEngine().synthesize(request)).value
    assert not draft.answered and draft.short_answer is None
    assert draft.answer.startswith("_The sources found do not answer this question. None of them mentions Dr Felix")


def test_how_to_call_is_no_short_answer_unless_its_page_states_the_question() -> None:
    pages = folder(
        ("zipkit.ZipFile — Read and write ZIP files.", "zipkit.ZipFile(file, mode='r')\n\nRead and write ZIP files."),
    )
    selection = select_answer("How do I pair up items of two lists together?", pages)
    assert selection.short_answer is None


# --- gaps -----------------------------------------------------------------------------------------------------


def test_no_gap_for_a_part_the_answer_fills_and_one_for_a_part_it_leaves() -> None:
    bakery = folder(
        (
            "About Mill Lane Bakery",
            "Mill Lane Bakery was founded by Aled Price, a miller's son. It sells bread and cakes.",
        )
    )
    selection = ask("Who founded Mill Lane Bakery and when?", bakery, "founded by Aled Price")
    assert selection.answered
    gaps = unanswered_parts("Who founded Mill Lane Bakery and when?", selection)
    assert gaps == ["when (a date), the question's further part"]
    dated = folder(("About Mill Lane Bakery", "Mill Lane Bakery was founded by Aled Price in 1987."))
    selection = ask("Who founded Mill Lane Bakery and when?", dated, "founded by Aled Price")
    assert unanswered_parts("Who founded Mill Lane Bakery and when?", selection) == []
    coach = folder(("Club", "Our head coach is Mara Ellery, who joined from Tolt in 2019."))
    selection = ask("Who is the head coach?", coach, "head coach is Mara")
    assert unanswered_parts("Who is the head coach?", selection) == []


async def test_an_answered_report_has_no_not_found_gap() -> None:
    pages = folder(("Bakery hours", "On Sundays the bakery opens from 9:00 to 13:00. On Mondays it is closed."))
    request = SynthesisInput(
        query="When does the bakery open on Sundays?", sources=pages, facts=[], reader=liking("On Sundays")
    )
    draft = (await OfflineEngine().synthesize(request)).value
    assert draft.answered
    assert not [g for g in draft.gaps if g.startswith("Not found")]


def test_a_gap_for_an_unanswered_question_says_plainly_what_is_missing() -> None:
    unanswered = AnswerSelection([], None, False)
    assert unanswered_parts("What happens if I cancel late?", unanswered) == ["a direct answer to the question"]
    assert unanswered_parts("When was the mill built?", unanswered) == ["when (a date)"]


# --- findings and counts ----------------------------------------------------------------------------------


def finding(statement: str, verified: bool, n: int = 1) -> Finding:
    return Finding(statement=f"{statement} [{n}]", citations=[f"[{n}]"], confidence=0.7, verified=verified)


def test_a_finding_off_the_question_loses_its_mark_and_goes_under_also_in_the_sources() -> None:
    citations = [make_citation(1, title="Shuffling lists")]
    findings = [
        finding("random.shuffle reorders a list in place.", verified=True),
        finding("Place the barrier into a broken state.", verified=True),
    ]
    out = question_first(findings, "How do I shuffle a list?", citations)
    assert [f.bears_on_question for f in out] == [True, False]
    assert out[1].verified is False and out[0].verified is True


def test_the_single_source_count_is_made_from_the_findings_listed() -> None:
    findings = [finding("a", True), finding("b", False), finding("c", False)]
    findings.append(finding("d", False).model_copy(update={"bears_on_question": False}))
    assert single_source_gap(findings) == "2 of the 3 findings on the question rest on a single independent source."
    assert single_source_gap([finding("a", True)]) is None


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_exports_put_findings_off_the_question_under_their_own_heading_without_a_mark(fmt: str) -> None:
    report = make_report(
        findings=[
            Finding(
                statement="subprocess.run accepts a timeout [1].", citations=["[1]"], confidence=0.8, verified=True
            ),
            Finding(
                statement="Barriers can be put into a broken state [2].",
                citations=["[2]"],
                confidence=0.6,
                verified=False,
                bears_on_question=False,
            ),
        ]
    )
    text = render_report(report, fmt)
    assert "Also in the sources" in text
    on, _, also = text.partition("Also in the sources")
    assert "accepts a timeout" in on and "verified" in on
    assert "broken state" in also.split("Sources")[0]
    assert "single source" not in also.split("Sources")[0] and "confidence" not in also.split("Sources")[0]
