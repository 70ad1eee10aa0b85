"""The how-to set's retrieval figure (eval/answers.py): is the asked API's page among the sources the answer read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from research_tool.eval.answers import AnswerSet, Item, api_page, api_rank, score, summarize


def page(name: str, synopsis: str, signature: str) -> dict[str, Any]:
    title = f"{name} — {synopsis}"
    return {"title": title, "full_content": f"{title}\n\n{signature}\n\n{synopsis}"}


def test_a_page_is_the_apis_when_its_name_holds_an_any_of_name() -> None:
    assert api_page("tally.Counter — Count things.", "", ["Counter"])
    assert api_page("conf.RawConfParser.read — Read files.", "", ["ConfParser"])  # what the answer is scored for
    assert api_page("qs.Queue.get — Take an item.", "", ["get("])  # a call form: the name's last part
    assert not api_page("qs.forget — Forget an item.", "", ["get("])
    assert not api_page("tally — Counting helpers.", "", ["Counter"])
    assert not api_page("tally.Counter — Count things.", "", ["partial application"])  # no name
    run = page("proc.run", "Run a command.", "proc.run(args, *, timeout=None, check=False)")
    assert api_page(run["title"], run["full_content"], ["timeout="])  # a parameter: its signature takes it
    call = page("proc.call", "Call a command.", "proc.call(args)")
    assert not api_page(call["title"], call["full_content"], ["timeout="])
    assert api_rank([call, run], ["timeout="]) == 2
    assert api_rank([call], ["timeout="]) is None


def test_score_counts_the_page_among_the_sources_read_and_leaves_out_questions_without_an_api(
    tmp_path: Path,
) -> None:
    items = [
        Item("h1", "How do I count words?", ["Counter"], "howto"),
        Item("h2", "How do I run a command with a limit?", ["timeout="], "howto"),
        Item("h3", "How do I draw a chart?", [], "howto"),  # no page in the corpus: not in the retrieval figure
    ]
    read = {
        "How do I count words?": [{"n": 1, "source": page("tally.Counter", "Count things.", "tally.Counter()")}],
        "How do I run a command with a limit?": [{"n": 1, "source": page("proc.call", "Call.", "proc.call(args)")}],
    }
    reports = [
        {"answer": "tally.Counter(iterable) [1].", "answered": True, "citations": [], "findings": []},
        {"answer": "proc.call(args) [1].", "answered": True, "citations": [], "findings": []},
        {"answer": "_The sources found do not answer this question._", "answered": False, "citations": []},
    ]
    base = [{"sentence": "", "docs": [], "pages": []} for _ in items]
    result = score(AnswerSet("howto", items, tmp_path, {}), items, reports, base, read)
    rows = {r["id"]: r for r in result["rows"]}
    assert (rows["h1"]["api_read"], rows["h1"]["api_rank"]) == (True, 1)
    assert (rows["h2"]["api_read"], rows["h2"]["api_rank"]) == (False, None)
    assert rows["h3"]["api_read"] is False
    lines = {f: (v, b) for f, v, _, b in summarize(result | {"part": "fit"})}
    assert lines["howto_api_page_read"] == (0.5, 0.0)
    assert lines["howto_not_in_corpus_refused"][0] == 1.0
