"""Office documents, sheets, e-books, mail and RTF in the local index (issue 42): each file written by the library
real tools write it with (research_tool/bench/document_files.py), one fact in each, read with its structure (headings
alone, table rows as header: value sentences) and a locator in its title and url (slide, sheet and row, chapter,
the message's subject and date). Without the `documents` extra these tests are skipped, and a file of those
formats is named as skipped with the extra to install."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("docx", reason="needs the `documents` extra (pip install 'research-tool[documents]')")
pytest.importorskip("odf", reason="needs odfpy (the dev extra) to write .odt/.ods")
pytest.importorskip("ebooklib", reason="needs ebooklib (the dev extra) to write .epub")

from research_tool.bench import document_files as files
from research_tool.engines.base import NumberedSource
from research_tool.engines.text.candidates import build_candidates
from research_tool.models.entities import SourceResult
from research_tool.providers.local_corpus import formats
from research_tool.providers.local_corpus.formats import read_file
from research_tool.providers.local_corpus.index import CorpusIndex


def read(path: Path):  # type: ignore[no-untyped-def]
    documents, _cut = read_file(path, path.read_bytes())
    return documents


def statements(path: Path) -> list[str]:
    sources = [
        NumberedSource(
            n=i,
            source=SourceResult(
                url=f"file:///{path.name}#{i}", title=d.title, source_name="local", full_content=d.text
            ),
        )
        for i, d in enumerate(read(path), start=1)
    ]
    return [c.statement for d in build_candidates(sources) for c in d.candidates]


def test_docx_keeps_headings_apart_lists_and_footer_and_leaves_comments_out(tmp_path: Path) -> None:
    path = tmp_path / "report.docx"
    files.write_docx(path)
    (document,) = read(path)
    assert document.title == "Hollin Valley ferries"
    assert "## Timetable\n\nBoats run from March to October." in document.text
    assert "Hollin Valley Transport Board." in document.text  # the footer
    assert "Secret reviewer comment" not in document.text
    said = statements(path)
    assert "The Hollin ferry crosses the river Tamsworth every twenty minutes." in said
    assert not any(s.startswith(("Timetable", "Hollin Valley ferries", "#")) for s in said)


def test_docx_table_rows_are_header_value_sentences(tmp_path: Path) -> None:
    path = tmp_path / "prices.docx"
    files.write_docx_table(path)
    (document,) = read(path)
    assert "Junior: Annual fee £60; Monthly fee £5." in document.text
    assert "Adult: Annual fee £180; Monthly fee £15." in document.text


def test_pptx_gives_one_document_a_slide_with_title_body_table_and_notes(tmp_path: Path) -> None:
    path = tmp_path / "deck.pptx"
    files.write_pptx(path)
    slides = {d.key: d for d in read(path)}
    assert list(slides) == ["slide-1", "slide-2"]
    second = slides["slide-2"]
    assert second.title == "Estates update, slide 2: Quarry Lane roof"
    assert second.text.startswith("## Quarry Lane roof\n\nOdile Brennan leads the Quarry Lane roof project.")
    assert "Scaffolding: Start May." in second.text
    assert "Mention the weather delays." in second.text  # speaker notes
    assert second.text.count("Quarry Lane roof\n") == 1


def test_xlsx_rows_pair_cells_with_the_header_and_name_sheet_and_row(tmp_path: Path) -> None:
    path = tmp_path / "budget.xlsx"
    files.write_xlsx(path)
    rows = {d.key: d for d in read(path)}
    lamps = rows["Streets!2"]
    assert lamps.title == "budget.xlsx, sheet Streets, row 2"
    assert lamps.text == "Elm Street lamps: Budget 4,250; Owner Highways."
    assert rows["Notes!2"].text == "Figures are in pounds."


def test_a_sheet_past_the_row_limit_is_cut_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from research_tool.providers.local_corpus import sheets

    monkeypatch.setattr(sheets, "MAX_ROWS", 50)
    path = tmp_path / "big.xlsx"
    files.write_xlsx(path, rows=500)
    documents, cut = read_file(path, path.read_bytes())
    assert len(documents) == 50 and cut == "cut at 50 rows"
    assert documents[0].text.startswith("Elm Street lamps")


def test_ods_csv_and_tsv_rows(tmp_path: Path) -> None:
    files.write_ods(tmp_path / "rota.ods")
    files.write_csv(tmp_path / "stations.csv")
    files.write_csv(tmp_path / "stations.tsv", delimiter="\t")
    (rota,) = read(tmp_path / "rota.ods")
    assert (rota.title, rota.text) == ("rota.ods, sheet Rota, row 2", "Monday: Volunteer Priya Natarajan.")
    for name in ("stations.csv", "stations.tsv"):
        (station,) = read(tmp_path / name)
        assert (station.title, station.text) == (f"{name}, row 2", "Wexley Green: Bikes 17; Docks 24.")


def test_odt_heading_and_paragraph(tmp_path: Path) -> None:
    path = tmp_path / "minutes.odt"
    files.write_odt(path)
    (document,) = read(path)
    assert document.title == "Allotment committee"
    assert document.text == (
        "## Allotment committee\n\nThe allotment committee meets on the third Thursday of each month."
    )


def test_epub_chapters_in_order_each_its_own_document(tmp_path: Path) -> None:
    path = tmp_path / "novel.epub"
    files.write_epub(path)
    chapters = read(path)
    assert [c.key for c in chapters] == ["chapter-1", "chapter-2"]
    assert chapters[1].title == "The Lighthouse at Garrow Point, chapter 2: The dog"
    assert "The lighthouse keeper's dog is called Biscuit." in chapters[1].text


def test_eml_names_subject_date_and_reads_attachments_as_documents(tmp_path: Path) -> None:
    attached = tmp_path / "attached.docx"
    files.write_docx_table(attached)
    path = tmp_path / "notice.eml"
    files.write_eml(path, attachment=("fees.docx", attached.read_bytes()))
    message, attachment = read(path)
    assert message.title == "Fenwick bridge closure (2026-02-02 09:30)"
    assert "The Fenwick bridge is closed on 9 March for repairs." in message.text
    assert "Roads Office <roads@example.org> wrote on 2026-02-02 09:30:" in message.text
    assert attachment.key == "attachment-1"
    assert attachment.title.startswith("Fenwick bridge closure, attachment fees.docx")
    assert "Junior: Annual fee £60; Monthly fee £5." in attachment.text


def test_mbox_gives_one_document_a_message(tmp_path: Path) -> None:
    path = tmp_path / "box.mbox"
    files.write_mbox(path)
    first, second = read(path)
    assert (first.key, second.key) == ("message-1", "message-2")
    assert second.title == "Choir practice (2026-02-03 18:00)"
    assert "Corn Exchange" in second.text


def test_rtf_paragraphs(tmp_path: Path) -> None:
    path = tmp_path / "letter.rtf"
    files.write_rtf(path)
    (document,) = read(path)
    assert "The Harrowgate prize went to the bakery Crumb and Co this year." in document.text
    assert "\\par" not in document.text and "rtf1" not in document.text


async def test_a_folder_of_every_format_is_indexed_and_each_fact_found_in_its_own_file(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    files.write_all(folder, ocr=False)
    index = CorpusIndex(tmp_path / "index.db")
    stats = await index.index_folder(folder)
    assert stats.skipped == [] and stats.files_failed == 0
    assert stats.kinds == {
        "docx": 2, "pptx": 1, "xlsx": 1, "odt": 1, "epub": 1, "e-mail": 1, "rtf": 1, "csv": 1,
    }  # fmt: skip
    for name, (question, answer) in files.FACTS.items():
        hits = await index.search(question, roots=[folder], limit=3)
        assert hits and hits[0].path.endswith(name), (name, [h.location for h in hits])
        assert answer in hits[0].text, (name, hits[0].text)
    (slide,) = await index.search("Quarry Lane roof Odile", roots=[folder], limit=1)
    assert slide.url.endswith("deck.pptx#slide-2") and "slide 2" in slide.title


async def test_formats_of_a_missing_extra_are_skipped_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    files.write_docx(folder / "report.docx")
    files.write_csv(folder / "stations.csv")
    (folder / "drawing.svg").write_text("<svg/>", encoding="utf-8")
    monkeypatch.setattr(formats, "missing_extra", lambda extra: extra == "documents")
    stats = await CorpusIndex(tmp_path / "index.db").index_folder(folder)
    reasons = {Path(path).name: reason for path, reason in stats.skipped}
    assert reasons == {
        "report.docx": "needs the `documents` extra: pip install 'research-tool[documents]'",
        "drawing.svg": "unsupported",
    }
    assert stats.kinds == {"csv": 1} and stats.files_added == 1
