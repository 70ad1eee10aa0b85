"""The local corpus index: formats, incremental re-indexing, ranking, hostile queries, roots."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
from pathlib import Path

import pytest

from research_tool.core.errors import BadInputError
from research_tool.providers.local_corpus import index as corpus_index
from research_tool.providers.local_corpus.index import CorpusIndex, build_match_query
from tests.support.eval_data import eval_data_dir

SCIFACT = eval_data_dir() / "scifact" / "corpus.jsonl"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def make_pdf(title: str, text: str) -> bytes:
    """A one-page PDF with a text layer, built by hand (pypdf can read but not typeset)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Title ({title}) >>".encode(),
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    write(
        root / "guide.md",
        "---\ntitle: Front Matter Guide\n---\n# Ignored heading\n\nGardening with tomatoes and basil.\n",
    )
    write(root / "notes" / "plain.txt", "Kettle notes\n\nBoiling water for tea takes three minutes.\n")
    write(
        root / "page.html",
        "<html><head><title>Volcano &amp; Lava</title><script>var volcano = 'script text';</script></head>"
        "<body><nav>Home | volcano menu</nav><main><h1>Eruptions</h1><p>Magma rises through the crust."
        "</p></main><footer>copyright</footer></body></html>",
    )
    (root / "paper.pdf").write_bytes(make_pdf("Glacier Dynamics", "Glaciers flow downhill under their own weight."))
    write(
        root / "data.jsonl",
        "\n".join(
            json.dumps(d)
            for d in [
                {"_id": "d1", "title": "Octopus cognition", "text": "Octopuses solve puzzles and use tools."},
                {
                    "id": 7,
                    "title": "Bee dances",
                    "text": "Honeybees dance to share where flowers are.",
                    "url": "https://example.org/bees",
                },
                {"id": "weird id/#1", "title": "", "text": "A record without a title about comets and ice."},
            ]
        )
        + "\nnot json\n",
    )
    write(root / ".hidden" / "secret.txt", "hidden volcano text")
    write(root / "drawing.svg", "not a document")
    return root


@pytest.fixture
def index(tmp_path: Path) -> CorpusIndex:
    return CorpusIndex(tmp_path / "index.db")


async def test_indexes_every_format_with_titles_urls_and_locations(corpus: Path, index: CorpusIndex) -> None:
    stats = await index.index_folder(corpus)
    assert (stats.files_added, stats.docs_added, stats.docs_total) == (5, 7, 7)

    async def top(query: str):
        hits = await index.search(query, roots=[corpus], limit=3)
        assert hits, query
        return hits[0]

    md = await top("tomatoes")
    assert (md.title, md.location) == ("Front Matter Guide", "guide.md")
    assert md.url == (corpus / "guide.md").resolve().as_uri()
    txt = await top("boiling tea")
    assert (txt.title, txt.location) == ("Kettle notes", "notes/plain.txt")
    html = await top("magma")
    assert html.title == "Volcano & Lava"
    assert "Magma rises" in html.text and "script text" not in html.text and "menu" not in html.text
    pdf = await top("glaciers")
    assert pdf.title == "Glacier Dynamics" and "flow downhill" in pdf.text
    octopus = await top("octopus puzzles")
    assert (octopus.doc_id, octopus.location) == ("d1", "data.jsonl#d1")
    assert octopus.url == (corpus / "data.jsonl").resolve().as_uri() + "#d1"
    bees = await top("honeybees")
    assert (bees.doc_id, bees.url, bees.location) == ("7", "https://example.org/bees", "data.jsonl#7")
    comet = await top("comets")
    assert comet.url.endswith("data.jsonl#weird%20id%2F%231")
    assert comet.title.startswith("A record without a title")
    # Hidden folders and unsupported files are not indexed.
    assert await index.search("hidden volcano", roots=[corpus]) != []
    assert all(".hidden" not in h.path for h in await index.search("hidden volcano", roots=[corpus]))


async def test_unchanged_files_are_not_read_again(
    corpus: Path, index: CorpusIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[str] = []
    real_read = corpus_index.read_file

    def counting_read(path: Path, data: bytes):
        parsed.append(path.name)
        return real_read(path, data)

    monkeypatch.setattr(corpus_index, "read_file", counting_read)
    await index.index_folder(corpus)
    assert len(parsed) == 5

    parsed.clear()
    again = await index.index_folder(corpus)
    assert parsed == []
    assert (again.files_read, again.files_parsed, again.files_unchanged) == (0, 0, 5)
    assert (again.docs_added, again.docs_updated, again.docs_removed, again.docs_unchanged) == (0, 0, 0, 7)

    # Touched but identical: read and hashed, not parsed.
    stat = (corpus / "guide.md").stat()
    os.utime(corpus / "guide.md", ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    touched = await index.index_folder(corpus)
    assert parsed == []
    assert (touched.files_read, touched.files_parsed, touched.files_unchanged) == (1, 0, 5)


async def test_changed_and_deleted_files_are_picked_up(corpus: Path, index: CorpusIndex) -> None:
    await index.index_folder(corpus)
    write(corpus / "notes" / "plain.txt", "Kettle notes\n\nCoffee brewing needs hotter water than tea.\n")
    (corpus / "page.html").unlink()
    stats = await index.index_folder(corpus)
    assert (stats.files_updated, stats.files_removed, stats.files_unchanged) == (1, 1, 3)
    assert (stats.docs_updated, stats.docs_removed, stats.docs_total) == (1, 1, 6)
    assert [h.location for h in await index.search("coffee", roots=[corpus])] == ["notes/plain.txt"]
    assert await index.search("boiling", roots=[corpus]) == []
    assert await index.search("magma", roots=[corpus]) == []


async def test_editing_one_jsonl_line_rewrites_only_that_document(corpus: Path, index: CorpusIndex) -> None:
    await index.index_folder(corpus)
    lines = (corpus / "data.jsonl").read_text().splitlines()
    lines[0] = json.dumps({"_id": "d1", "title": "Octopus cognition", "text": "Octopuses open jars."})
    lines[1] = json.dumps({"id": 8, "title": "Ant trails", "text": "Ants follow pheromone trails."})
    write(corpus / "data.jsonl", "\n".join(lines))
    stats = await index.index_folder(corpus)
    assert (stats.docs_updated, stats.docs_added, stats.docs_removed) == (1, 1, 1)
    assert stats.docs_unchanged == 4 + 1  # the 4 other files, and the comet line
    assert (await index.search("jars", roots=[corpus]))[0].doc_id == "d1"
    assert await index.search("honeybees", roots=[corpus]) == []


async def test_title_match_ranks_first(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    write(root / "a.md", "# Cooking rice\n\n" + "Pasta and lentils. Serve warm. " * 5 + "Some risotto uses saffron.\n")
    write(root / "b.md", "# Saffron\n\nA spice from crocus flowers, used in paella.\n")
    write(root / "c.md", "# Spices\n\nSaffron is costly; saffron is red. Cumin is brown.\n")
    boosted = CorpusIndex(tmp_path / "boosted.db")
    await boosted.index_folder(root)
    hits = await boosted.search("saffron", roots=[root])
    assert [h.title for h in hits] == ["Saffron", "Spices", "Cooking rice"]
    assert [h.rank for h in hits] == [1, 2, 3]
    assert hits[0].score > hits[1].score > hits[2].score
    assert "saffron" in hits[0].snippet.lower()
    # The same documents without the title weight: the body with more hits wins.
    flat = CorpusIndex(tmp_path / "flat.db", title_weight=0.0)
    await flat.index_folder(root)
    assert (await flat.search("saffron", roots=[root]))[0].title == "Spices"


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""unbalanced',
        "-",
        "--rm -rf",
        "tea AND",
        "AND OR NOT",
        "NEAR(tea coffee)",
        "title:tea",
        ":",
        "*",
        "tea*",
        "(",
        ")",
        "^tea",
        "{tea}",
        "tea + coffee",
        "'; DROP TABLE docs; --",
        "Ünïcödé 東京 🤖",
        "",
        "   ",
        "the of and",
        "\x00\x01",
        "a" * 5000,
    ],
)
async def test_hostile_queries_are_plain_words(corpus: Path, index: CorpusIndex, query: str) -> None:
    """FTS5 syntax in a query is inert: it finds exactly what its words alone find, and no words, nothing."""
    await index.index_folder(corpus)
    hits = await index.search(query, roots=[corpus], limit=5)
    words = " ".join(re.findall(r"[^\W_]+", query))
    plain = await index.search(words, roots=[corpus], limit=5) if words else []
    assert [(h.location, h.rank) for h in hits] == [(h.location, h.rank) for h in plain]
    if "tea" in words.casefold().split():
        assert "notes/plain.txt" in [h.location for h in hits]  # the kettle note is about tea


def test_build_match_query_quotes_terms_and_drops_stopwords() -> None:
    assert build_match_query("How do I run a subprocess with a timeout?") == '"run" OR "subprocess" OR "timeout"'
    assert build_match_query('foo-bar "baz" AND qux:1 capture_output') == (
        '"foo" OR "bar" OR "baz" OR "qux" OR "1" OR "capture" OR "output"'
    )
    assert build_match_query("the of and") == '"the" OR "of" OR "and"'  # only stopwords: keep them
    assert build_match_query("vitamin D") == '"vitamin" OR "d"'
    assert build_match_query('" * - :') is None


async def test_stemming_matches_word_forms(corpus: Path, index: CorpusIndex) -> None:
    await index.index_folder(corpus)
    assert [h.location for h in await index.search("dancing honeybee", roots=[corpus])][:1] == ["data.jsonl#7"]


async def test_search_is_restricted_to_roots(tmp_path: Path, index: CorpusIndex) -> None:
    write(tmp_path / "one" / "x.txt", "Shared topic: lighthouses.\n")
    write(tmp_path / "one-more" / "y.txt", "Shared topic: lighthouses too.\n")
    write(tmp_path / "two" / "z.txt", "Shared topic: lighthouses again.\n")
    for name in ("one", "one-more", "two"):
        await index.index_folder(tmp_path / name)
    only_one = await index.search("lighthouses", roots=[tmp_path / "one"])
    assert [h.path for h in only_one] == [str((tmp_path / "one" / "x.txt").resolve())]
    both = await index.search("lighthouses", roots=[tmp_path / "one", tmp_path / "two"])
    assert sorted(h.location for h in both) == ["x.txt", "z.txt"]
    assert len(await index.search("lighthouses")) == 3
    assert await index.search("lighthouses", roots=[]) == []


async def test_a_single_file_can_be_a_root(corpus: Path, index: CorpusIndex) -> None:
    stats = await index.index_folder(corpus / "data.jsonl")
    assert stats.docs_total == 3
    hits = await index.search("octopus", roots=[corpus / "data.jsonl"])
    assert hits[0].location == "data.jsonl#d1"


async def test_missing_folder_is_bad_input(tmp_path: Path, index: CorpusIndex) -> None:
    with pytest.raises(BadInputError, match="corpus folder not found"):
        await index.index_folder(tmp_path / "nope")


async def test_broken_pdf_is_skipped_not_fatal(tmp_path: Path, index: CorpusIndex) -> None:
    write(tmp_path / "d" / "ok.txt", "Readable text about owls.\n")
    (tmp_path / "d" / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    stats = await index.index_folder(tmp_path / "d")
    assert (stats.files_added, stats.files_failed) == (1, 1)
    assert (await index.search("owls", roots=[tmp_path / "d"]))[0].location == "ok.txt"


async def test_concurrent_searches_while_indexing(tmp_path: Path, index: CorpusIndex) -> None:
    root = tmp_path / "many"
    for n in range(60):
        write(root / f"doc{n}.txt", f"Document {n}\n\nPenguins number {n} live in the south.\n")
    await index.index_folder(root)
    write(root / "extra.txt", "Extra\n\nPenguins and puffins.\n")
    results = await asyncio.gather(
        index.index_folder(root), *(index.search("penguins", roots=[root], limit=5) for _ in range(20))
    )
    assert all(len(r) == 5 for r in results[1:])


@pytest.mark.skipif(not SCIFACT.exists(), reason=f"SciFact data not found at {SCIFACT} (set EVAL_DATA_DIR)")
async def test_the_whole_scifact_corpus_indexes_and_a_title_finds_its_abstract(tmp_path: Path) -> None:
    index = CorpusIndex(tmp_path / "scifact.db")
    stats = await index.index_folder(SCIFACT)
    assert stats.docs_total == 5183
    hits = await index.search("Microstructural development of human newborn cerebral white matter", roots=[SCIFACT])
    assert hits[0].doc_id == "4983" and hits[0].location == "corpus.jsonl#4983"


async def test_ranking_in_one_folder_ignores_other_indexed_folders(tmp_path: Path, index: CorpusIndex) -> None:
    """BM25 statistics are per indexed folder: indexing an unrelated folder B changes nothing in A's ranking."""
    folder_a = tmp_path / "a"
    write(folder_a / "kiln.md", "# Kiln firing\n\nA kiln fires glazed pottery at high heat for many hours.\n")
    write(folder_a / "glaze.md", "# Glazes\n\nA glaze is glass fused to pottery; ash glaze came first.\n")
    write(folder_a / "wheel.md", "# Throwing\n\nThe potter's wheel shapes clay; pottery needs a kiln later.\n")
    await index.index_folder(folder_a)
    before = [(h.doc_id, h.score) for h in await index.search("kiln pottery glaze", roots=[folder_a])]

    folder_b = tmp_path / "b"
    for i in range(30):  # many documents that make "pottery" common and "kiln" rare across the whole file
        write(folder_b / f"note{i}.md", f"# Note {i}\n\nPottery pottery pottery market stall number {i}.\n")
    await index.index_folder(folder_b)
    after = [(h.doc_id, h.score) for h in await index.search("kiln pottery glaze", roots=[folder_a])]

    assert [d for d, _ in after] == [d for d, _ in before]
    assert [s for _, s in after] == pytest.approx([s for _, s in before])
    both = await index.search("pottery", roots=[folder_a, folder_b], limit=50)
    assert len(both) == 33  # a search over both folders still sees every document


async def test_subfolder_of_an_indexed_folder_joins_its_collection(tmp_path: Path, index: CorpusIndex) -> None:
    write(tmp_path / "top" / "one.md", "# One\n\nThe heron waits by the reed bed at dawn.\n")
    write(tmp_path / "top" / "sub" / "two.md", "# Two\n\nA heron nests in the reed bed by the lake.\n")
    await index.index_folder(tmp_path / "top")
    stats = await index.index_folder(tmp_path / "top" / "sub")
    assert stats.docs_unchanged == 1 and stats.docs_added == 0
    hits = await index.search("heron reed", roots=[tmp_path / "top" / "sub"])
    assert [h.title for h in hits] == ["Two"]


async def test_a_second_index_object_on_an_existing_file_takes_no_write_lock_and_keeps_working(
    tmp_path: Path,
) -> None:
    """Sessions each open their own CorpusIndex on one file: opening an existing layout writes nothing."""
    write(tmp_path / "docs" / "a.md", "# Heron\n\nThe heron waits by the reed bed.\n")
    first = CorpusIndex(tmp_path / "index.db")
    await first.index_folder(tmp_path / "docs")
    second = CorpusIndex(tmp_path / "index.db")
    for _ in range(2):
        assert [h.title for h in await second.search("heron", roots=[tmp_path / "docs"])] == ["Heron"]


async def test_the_parts_of_a_titles_compound_names_are_searchable(tmp_path: Path, index: CorpusIndex) -> None:
    root = tmp_path / "api"
    write(root / "a.txt", "tabkit.RowReader — Iterate over the lines of a table.\n\nReturns each line.\n")
    write(root / "b.txt", "hashkit.sha512 — Digest bytes.\n\nReturns a digest.\n")
    write(root / "c.txt", "tabkit.load — Load a table.\n\nLoads everything at once.\n")
    await index.index_folder(root)
    assert (await index.search("row reader", roots=[root]))[0].title.startswith("tabkit.RowReader")
    assert (await index.search("SHA-512", roots=[root]))[0].title.startswith("hashkit.sha512")
    assert corpus_index.name_parts("tabkit.RowReader — Iterate") == "Row Reader"
    assert corpus_index.name_parts("A plain title of words") == ""


async def test_file_progress_counts_every_file_to_the_total(corpus: Path, index: CorpusIndex) -> None:
    """What `index`'s progress bar shows (files done, files left): called after each file, ending at the total."""
    seen: list[tuple[int, int]] = []
    await index.index_folder(corpus, file_progress=lambda done, total: seen.append((done, total)))
    assert seen == [(n, 5) for n in range(1, 6)]
