"""Hostile office files and scans (issue 42): a zip bomb docx, "billion laughs" and external entities (XXE), a
truncated and a fake archive, an encrypted PDF, a 144-megapixel image header and a sheet past the row limit are
each skipped or cut at a documented limit (docs/documents.md), named once with their reason, and the good file
beside them is indexed; nothing of /etc/passwd reaches the index."""

from __future__ import annotations

import asyncio
import io
import time
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("docx", reason="needs the `documents` extra (pip install 'research-tool[documents]')")

from research_tool.bench import document_files as files
from research_tool.core.settings import reset_settings_cache
from research_tool.providers.local_corpus import sheets
from research_tool.providers.local_corpus.formats import read_file
from research_tool.providers.local_corpus.index import CorpusIndex


def hostile_folder(folder: Path) -> None:
    folder.mkdir()
    files.write_docx(folder / "good.docx")
    files.zip_bomb_docx(folder / "bomb.docx", unpacked=100_000_000)
    files.entity_docx(folder / "laughs.docx", "laughs")
    files.entity_docx(folder / "xxe.docx", "xxe")
    whole = (folder / "good.docx").read_bytes()
    (folder / "truncated.docx").write_bytes(whole[: len(whole) // 2])
    (folder / "fake.xlsx").write_text("this is not a spreadsheet", encoding="utf-8")
    files.encrypted_pdf(folder / "locked.pdf")
    files.huge_png_header(folder / "huge.png")
    files.write_xlsx(folder / "long.xlsx", rows=300)


async def test_each_hostile_file_is_named_once_with_its_reason_and_the_good_one_is_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sheets, "MAX_ROWS", 100)
    monkeypatch.setenv("RESEARCH_DATA_DIR", str(tmp_path / "data"))  # the OCR cache's home
    reset_settings_cache()
    folder = tmp_path / "hostile"
    hostile_folder(folder)
    index = CorpusIndex(tmp_path / "index.db")
    started = time.monotonic()
    stats = await index.index_folder(folder)
    assert time.monotonic() - started < 30
    reasons = {Path(path).name: reason for path, reason in stats.skipped}
    assert len(reasons) == len(stats.skipped)  # each named once
    assert reasons["bomb.docx"].startswith("limit hit: ") and "zip bomb" in reasons["bomb.docx"]
    assert reasons["laughs.docx"].startswith("limit hit: ") and "entities" in reasons["laughs.docx"]
    assert reasons["xxe.docx"].startswith("limit hit: ") and "entities" in reasons["xxe.docx"]
    assert reasons["truncated.docx"].startswith("corrupt: ")
    assert reasons["fake.xlsx"].startswith("corrupt: ")
    assert reasons["locked.pdf"] == "encrypted"
    assert reasons["huge.png"].startswith(("limit hit: ", "needs the `ocr` extra"))
    assert set(reasons) == {"bomb.docx", "laughs.docx", "xxe.docx", "truncated.docx", "fake.xlsx", "locked.pdf",
                            "huge.png"}  # fmt: skip
    assert [(Path(p).name, why) for p, why in stats.cut] == [("long.xlsx", "cut at 100 rows")]

    hits = await index.search("Which river does the Hollin ferry cross?", roots=[folder], limit=1)
    assert hits and hits[0].path.endswith("good.docx")
    stored = await asyncio.to_thread(lambda: b"".join(p.read_bytes() for p in tmp_path.glob("index.db*")))
    assert b"root:x:0:0" not in stored and b"/bin/bash" not in stored


def test_the_bomb_is_refused_from_the_zip_directory_before_anything_is_inflated(tmp_path: Path) -> None:
    path = tmp_path / "bomb.docx"
    files.zip_bomb_docx(path, unpacked=100_000_000)
    assert path.stat().st_size < 1_000_000
    inflated: list[str] = []
    real_open = zipfile.ZipFile.open

    def counting_open(self, name, *args, **kwargs):  # type: ignore[no-untyped-def]
        inflated.append(name if isinstance(name, str) else name.filename)
        return real_open(self, name, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(zipfile.ZipFile, "open", counting_open)
        with pytest.raises(Exception, match="zip bomb"):
            read_file(path, path.read_bytes())
    assert "word/document.xml" not in inflated


def test_an_epub_and_an_odt_declaring_entities_are_refused(tmp_path: Path) -> None:
    laughs = '<!DOCTYPE x [<!ENTITY a "lol"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
    for name, member in (("book.epub", "META-INF/container.xml"), ("notes.odt", "content.xml")):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr(member, f'<?xml version="1.0"?>{laughs}<x>&b;</x>')
        path = tmp_path / name
        path.write_bytes(buffer.getvalue())
        with pytest.raises(Exception, match="entities"):
            read_file(path, path.read_bytes())
