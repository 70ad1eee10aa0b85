"""fit_spans' checks of the short-answer operating point inside the fit part: nested folds by article and the
spread of a runner-sized read."""

from __future__ import annotations

import numpy as np

from research_tool.engines.text.short_answers import SPAN_FEATURES, AskedFor
from research_tool.eval.fit_spans import ARTICLE_FOLDS, Lead, SpanRows, article_cross_validated, fold_of, margin_table

WHOLE = SPAN_FEATURES.index("whole")


def rows(right_first: bool, article: str) -> SpanRows:
    """Two spans; the `whole` column marks the first, which holds the gold when `right_first`."""
    x = np.zeros((2, len(SPAN_FEATURES)))
    x[0, WHOLE] = 1.0
    right = np.array([1.0, 0.0]) if right_first else np.array([0.0, 1.0])
    return SpanRows(x, ["Mara Holt", "the harbour"], right.copy(), right, "person", article)


def lead(right_first: bool, article: str) -> Lead:
    asked = AskedFor("person", {"found": 1.0}, None, "Who found the harbour?")
    return Lead(None, False, rows(right_first, article), asked, 0.5, 0.5, article)


def test_articles_fall_in_folds_by_number() -> None:
    assert fold_of("s24") == 24 % ARTICLE_FOLDS
    assert fold_of("s28") == fold_of("s24")
    assert fold_of("s25") != fold_of("s24")


def test_nested_folds_score_every_lead_from_held_out_fits() -> None:
    articles = [f"s{a}" for a in range(24, 32)]
    sentences = [rows(True, a) for a in articles for _ in range(4)]
    leads = [lead(k % 3 != 0, a) for a in articles for k in range(6)]
    probs, right, accuracy = article_cross_validated(sentences, leads, list(range(len(SPAN_FEATURES))), ["span_prob"])
    assert accuracy == 1.0  # the held-out gold sentences' best span is the marked one
    assert set(probs) == set(range(len(leads)))
    assert all(right[i] == (i % 6 % 3 != 0) for i in range(len(leads)))


def test_margin_table_reads_a_sure_operating_point_as_sure() -> None:
    leads = [Lead("Mara Holt", True, None, article=f"s{24 + k % 12}") for k in range(60)]
    lines = margin_table(leads, {}, {})
    assert len(lines) == 5
    assert all("P(read >= 0.70) 1.00" in line for line in lines)
