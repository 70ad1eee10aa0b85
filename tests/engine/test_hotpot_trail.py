"""Follow-the-trail on real HotpotQA documents (skips when the shared eval folder is absent)."""

import json
from pathlib import Path

import pytest

from research_tool.engines.base import ReflectionContext
from research_tool.engines.offline import OfflineEngine
from research_tool.providers.local_corpus.index import CorpusIndex

EVAL = Path("/work/shared/eval/hotpotqa_train100")
pytestmark = pytest.mark.skipif(not EVAL.is_dir(), reason="shared HotpotQA eval folder not present")
QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986"


@pytest.fixture(scope="module")
def corpus() -> dict[str, list[str]]:
    return json.loads((EVAL / "hipporag_hotpotqa_train100_corpus.json").read_text())


def _index(tmp_path: Path, corpus: dict[str, list[str]]) -> CorpusIndex:
    folder = tmp_path / "corpus"
    folder.mkdir()
    with open(folder / "hotpot.jsonl", "w") as handle:
        for number, (title, sentences) in enumerate(corpus.items()):
            handle.write(json.dumps({"id": str(number), "title": title, "text": "".join(sentences)}) + "\n")
    index = CorpusIndex(tmp_path / "index.db")
    index.index_folder_sync(folder)
    return index


async def test_bridge_document_leads_to_the_answer_document(tmp_path: Path, corpus) -> None:
    from research_tool.models.entities import SourceResult

    index = _index(tmp_path, corpus)
    engine = OfflineEngine()
    first_query = "directed film shot around Leland North Carolina 1986"
    hits = {h.title: h for h in index.search_sync(first_query, limit=10)}
    assert "Leland, North Carolina" in hits
    bridge = hits["Leland, North Carolina"]
    page = SourceResult(
        url=bridge.url, title=bridge.title, full_content=bridge.text, source_name="local", query=first_query
    )
    facts = (await engine.extract(QUESTION, page, 1)).value.facts
    context = ReflectionContext(
        query=QUESTION,
        domain="general",
        iteration=1,
        max_queries=3,
        facts=facts,
        entities=[],
        sources=[page],
        queries_run=[first_query],
        failed_queries=[],
    )
    outcome = (await engine.reflect(context)).value
    trail = [q.query for q in outcome.response.new_queries if q.intent == "follow_trail"]
    assert trail and trail[0].startswith("Maximum Overdrive")
    found = [h.title for h in index.search_sync(trail[0], limit=3)]
    assert "Maximum Overdrive" in found
