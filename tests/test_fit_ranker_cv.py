"""fit_ranker's cross-validation inside the fit part: folds by article, held-out reads only."""

from __future__ import annotations

from research_tool.eval.answers import Item
from research_tool.eval.fit_ranker import CV_FOLDS, Question, cross_validate, fold


def squad(qid: str, article: int, part: str = "fit") -> Question:
    return Question("squad", part, Item(qid, f"question {qid}?", ["gold"], "factoid", {f"s{article:02d}p003"}))


def test_questions_of_one_article_share_a_fold() -> None:
    first, second = squad("a", 6), squad("b", 6)
    assert fold(first, 0) == fold(second, 1) == 6 % CV_FOLDS
    assert fold(squad("c", 7), 0) != fold(first, 0)


def test_cross_validation_reads_only_held_out_fit_questions() -> None:
    # feature 0 marks the answer sentence, feature 1 is noise that points the other way
    qs = [squad(f"q{a}{k}", a) for a in range(8) for k in range(3)]
    rows = {q.item.id: {"x": [[1.0, 0.0], [0.0, 1.0], [0.0, 0.5]], "y": [1, 0, 0]} for q in qs}
    test_only = squad("t", 30, part="test")
    rows[test_only.item.id] = {"x": [[0.0, 1.0], [1.0, 0.0]], "y": [1, 0]}  # would read 0 if it were scored
    figures = cross_validate([*qs, test_only], rows, [0, 1])
    assert figures["squad_cv_first"] == 1.0


def test_a_set_left_out_of_the_fit_is_read_but_not_trained_on() -> None:
    # SQuAD's answer sentences carry feature 0, the multi-hop set's carry feature 1
    qs = [squad(f"q{a}{k}", a) for a in range(8) for k in range(3)]
    hops = [Question("musique", "fit", Item(f"m{k}", f"chain {k}?", ["gold"], "factoid")) for k in range(8)]
    rows = {q.item.id: {"x": [[1.0, 0.0], [0.0, 1.0]], "y": [1, 0]} for q in qs}
    rows |= {q.item.id: {"x": [[1.0, 0.0], [0.0, 1.0]], "y": [0, 1]} for q in hops}
    assert cross_validate([*qs, *hops], rows, [0, 1], fit_sets=("squad",))["musique_cv_first"] == 0.0
    assert cross_validate([*qs, *hops], rows, [0, 1], fit_sets=("musique",))["musique_cv_first"] == 1.0
