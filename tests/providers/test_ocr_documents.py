"""Scans through OCR (issue 42): a PNG photo of a notice and a PDF page without a text layer, both drawn with
Pillow at test time, are read by RapidOCR (its models come inside its wheel), the PDF page cited as `#page-1`;
the text is cached by the image's hash, so a second read does not recognise again. Skipped without the `ocr`
extra."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("rapidocr_onnxruntime", reason="needs the `ocr` extra (pip install 'research-tool[ocr]')")
pytest.importorskip("PIL", reason="needs the `ocr` extra (pip install 'research-tool[ocr]')")

from research_tool.bench import document_files as files
from research_tool.core.settings import reset_settings_cache
from research_tool.providers.local_corpus import ocr
from research_tool.providers.local_corpus.documents import DocumentLimitError
from research_tool.providers.local_corpus.formats import read_file


@pytest.fixture(autouse=True)
def own_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCH_DATA_DIR", str(tmp_path / "data"))
    reset_settings_cache()


def test_a_photo_of_a_notice_is_read_and_a_second_read_comes_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "notice.png"
    files.write_png(path)
    (document,) = read_file(path, path.read_bytes())[0]
    assert "Ashby pool reopens on 14 June" in document.text
    assert document.title == "notice.png (OCR)"
    assert "## Notice" in document.text  # the short label line stands alone

    def no_second_recognition(_image: object) -> str:
        raise AssertionError("recognised again")

    monkeypatch.setattr(ocr, "_recognise", no_second_recognition)
    (again,) = read_file(path, path.read_bytes())[0]
    assert again.text == document.text


def test_a_scanned_pdf_page_is_read_and_cited_by_page(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    files.write_scanned_pdf(path)
    (page,) = read_file(path, path.read_bytes())[0]
    assert page.key == "page-1" and page.title == "scan, page 1"
    assert "Corby library card costs 4 pounds" in page.text


def test_an_image_of_144_megapixels_is_refused_from_its_header(tmp_path: Path) -> None:
    path = tmp_path / "huge.png"
    files.huge_png_header(path)
    with pytest.raises(DocumentLimitError, match="144 MP"):
        read_file(path, path.read_bytes())


async def test_the_event_loop_keeps_answering_while_a_page_is_read(tmp_path: Path) -> None:
    """OCR runs in a worker process, called from the index's threads: a server's loop is never held by it."""
    import asyncio
    import time

    from research_tool.providers.local_corpus.index import CorpusIndex

    folder = tmp_path / "scans"
    folder.mkdir()
    files.write_png(folder / "notice.png")
    ocr.stop_worker()  # the page below pays for starting the worker and loading the models too
    lags: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        while not done.is_set():
            started = time.monotonic()
            await asyncio.sleep(0.01)
            lags.append(time.monotonic() - started - 0.01)

    ticker = asyncio.create_task(tick())
    stats = await CorpusIndex(tmp_path / "index.db").index_folder(folder)
    done.set()
    await ticker
    assert stats.files_added == 1 and stats.kinds == {"image": 1}
    assert ocr.worker_pid() is None  # the folder is done: the models' memory is given back
    assert len(lags) > 10 and max(lags) < 0.5, max(lags)


def test_a_worker_that_died_is_started_again(tmp_path: Path) -> None:
    path = tmp_path / "notice.png"
    files.write_png(path)
    ocr.warm_up()
    assert ocr._worker is not None
    ocr._worker.kill()
    ocr._worker.wait()
    text = ocr._recognise(files.notice_image(["The Ashby pool reopens on 14 June."]))
    assert "Ashby pool" in text
