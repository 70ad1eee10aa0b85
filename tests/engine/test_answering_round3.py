"""Answer selection rules of issue 26's third round (multi-hop, yes/no, short answers, how-to), each on small
hand-written pages."""

from __future__ import annotations

from research_tool.engines.base import NumberedSource
from research_tool.engines.text.answering import select_answer
from research_tool.engines.text.question_intent import classify_question
from research_tool.models.entities import SourceResult


def page(n: int, title: str, text: str) -> NumberedSource:
    return NumberedSource(
        n=n, source=SourceResult(url=f"file:///pages.jsonl#{n}", title=title, source_name="local", full_content=text)
    )


def test_a_question_after_a_scene_setting_statement_is_typed_by_the_sentence_that_asks() -> None:
    assert classify_question("The Varn bridge is made of stone. Is the Tolt bridge also stone?").answer_type == "yes_no"
    assert classify_question("Mara Quill carves birds. When was she born?").answer_type == "date"
    # initials inside the question are no sentence break
    assert classify_question("Which film produced by D.P. Varma won the prize?").answer_type != "yes_no"


def test_a_yes_no_question_after_a_statement_gets_a_verdict_from_each_page() -> None:
    sources = [
        page(1, "Mara Quill", "Mara Quill (born 1950) is a Norwegian sculptor and holds a knighthood."),
        page(2, "Teo Brandt", "Teo Brandt (born 1961) is a Norwegian painter of coastal scenes."),
    ]
    selection = select_answer(
        "The sculptor Mara Quill holds a knighthood. Does the painter Teo Brandt also hold one?", sources
    )
    assert selection.answered and selection.verdict == "No"


def test_how_to_leads_with_the_api_named_for_the_act_not_one_asking_about_its_state() -> None:
    stopped = (
        "jobkit.Job.stopped — Return True if the job was stopped.\n\n"
        "jobkit.Job.stopped(self)\n\nReturn True if the job was stopped."
    )
    stopping = (
        "jobkit.Job.stopping — Return how many stop requests are pending.\n\n"
        "jobkit.Job.stopping(self)\n\nCount the stop requests."
    )
    stop = (
        "jobkit.Job.stop — Request that this job stop itself.\n\n"
        "jobkit.Job.stop(self, reason=None)\n\nAsk the job to stop."
    )
    sources = [
        page(1, "jobkit.Job.stopped — Return True if the job was stopped.", stopped),
        page(2, "jobkit.Job.stopping — Return how many stop requests are pending.", stopping),
        page(3, "jobkit.Job.stop — Request that this job stop itself.", stop),
    ]
    selection = select_answer("How do I stop a jobkit job?", sources)
    assert selection.answered
    assert selection.sentences[0].statement.startswith("jobkit.Job.stop(")


def test_a_how_many_short_answer_may_be_a_count_in_words() -> None:
    sources = [
        page(
            1,
            "Varn guild",
            "The Varn guild counts eight master masons among its members, 40 apprentices and 120 labourers.",
        )
    ]
    selection = select_answer("How many master masons are members of the Varn guild?", sources)
    assert selection.answered and selection.span == "eight"
