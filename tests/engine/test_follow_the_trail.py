"""Follow the trail: a name that the most relevant fact of a first-hop document mentions, and the question does
not, becomes the next query, and that query finds the next document (a small corpus written for this test)."""

from __future__ import annotations

import json
from pathlib import Path

from research_tool.engines.base import ReflectionContext
from research_tool.engines.offline import OfflineEngine
from research_tool.models.entities import SourceResult
from research_tool.providers.local_corpus.index import CorpusIndex

QUESTION = "Which river flows through the town where the painter Ilse Varga was born?"
DOCUMENTS = {
    "Ilse Varga": (
        "Ilse Varga (1901–1977) was a painter known for her harbour scenes. Varga was born in Kelmend, a market "
        "town in the north of the country. She later taught drawing in Vienna, where she died."
    ),
    "Kelmend": (
        "Kelmend is a market town in the north. The river Sava flows through Kelmend, past its old stone mill. "
        "The town holds a horse fair every spring."
    ),
    "Vienna": "Vienna is the capital of Austria. The Danube flows through Vienna.",
    "Harbour painting": "Harbour scenes were a popular subject for painters in the early twentieth century.",
}
FIRST_QUERY = "painter Ilse Varga born town"


def build_index(tmp_path: Path) -> CorpusIndex:
    folder = tmp_path / "corpus"
    folder.mkdir()
    lines = [json.dumps({"id": str(n), "title": t, "text": text}) for n, (t, text) in enumerate(DOCUMENTS.items())]
    (folder / "towns.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    index = CorpusIndex(tmp_path / "index.db")
    index.index_folder_sync(folder)
    return index


async def test_the_bridge_document_leads_to_the_answer_document(tmp_path: Path) -> None:
    index = build_index(tmp_path)
    hits = {h.title: h for h in index.search_sync(FIRST_QUERY, limit=10)}
    assert "Ilse Varga" in hits  # the first hop: the question names the painter, not the town
    bridge = hits["Ilse Varga"]
    page = SourceResult(
        url=bridge.url, title=bridge.title, full_content=bridge.text, source_name="local", query=FIRST_QUERY
    )
    engine = OfflineEngine()
    facts = (await engine.extract(QUESTION, page, 1)).value.facts
    context = ReflectionContext(
        query=QUESTION,
        domain="general",
        iteration=1,
        max_queries=3,
        facts=facts,
        entities=[],
        sources=[page],
        queries_run=[FIRST_QUERY],
        failed_queries=[],
    )

    outcome = (await engine.reflect(context)).value

    trail = [q.query for q in outcome.response.new_queries if q.intent == "follow_trail"]
    # Kelmend (in the fact that shares "born" with the question) goes before Vienna (in a weaker fact)
    assert trail and trail[0].startswith("Kelmend"), trail
    assert not any(q.startswith("Ilse Varga") for q in trail)  # a name the question has is no trail
    assert index.search_sync(trail[0], limit=3)[0].title == "Kelmend"
