"""Which files the local index reads, by suffix, and with what (README's table of formats says the same).

| kind | suffixes | needs |
|---|---|---|
| markdown, text, html, pdf (text layer), jsonl | .md .markdown .txt .html .htm .pdf .jsonl | nothing |
| e-mail | .eml .mbox | nothing (the standard library) |
| delimited text | .csv .tsv | nothing |
| docx, pptx, xlsx, odt, ods, epub, rtf | the same | the `documents` extra |
| images, and PDF pages without a text layer | .png .jpg .jpeg .tif .tiff | the `ocr` extra |

`read_file` gives a file's documents and, when a documented limit cut it (a sheet past its row limit), a note
saying so; a file whose format needs a missing extra raises MissingExtraError naming the extra.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from research_tool.core.extras import DOCUMENTS_MODULES, OCR_MODULES, install_hint, module_installed
from research_tool.providers.local_corpus import documents as base
from research_tool.providers.local_corpus import ebooks, mail, ocr, office, sheets
from research_tool.providers.local_corpus.documents import CorpusDocument, DocumentParseError, MissingExtraError

Read = Callable[[Path, bytes], tuple[list[CorpusDocument], str | None]]

_MODULES_OF_EXTRA = {office.DOCUMENTS_EXTRA: DOCUMENTS_MODULES, ocr.OCR_EXTRA: OCR_MODULES}


@dataclass(frozen=True)
class Format:
    kind: str  # how the index summary counts it
    read: Read
    extra: str | None = None  # the optional extra it needs


def _plain(reader: Callable[[Path, bytes], list[CorpusDocument]]) -> Read:
    def read(path: Path, data: bytes) -> tuple[list[CorpusDocument], str | None]:
        return reader(path, data), None

    return read


def _read_pdf(path: Path, data: bytes) -> list[CorpusDocument]:
    return base.read_pdf(path, data, scanned_page=ocr.pdf_page_text)


def _attachment(path: Path, data: bytes) -> list[CorpusDocument]:
    """An e-mail attachment in a format the index reads (not another message: no nesting)."""
    found = FORMATS.get(path.suffix.lower())
    if found is None or found.kind in ("e-mail", "mbox") or len(data) > _attachment_limit():
        raise DocumentParseError(f"attachment {path.name} not read")
    if found.extra and missing_extra(found.extra):
        raise MissingExtraError(f"attachment {path.name} needs the {found.extra} extra", extra=found.extra)
    return found.read(path, data)[0]


def _attachment_limit() -> int:
    from research_tool.core.settings import get_settings

    return get_settings().corpus_max_file_bytes


DOCS = office.DOCUMENTS_EXTRA
FORMATS: dict[str, Format] = {
    ".md": Format("markdown", _plain(base.read_markdown)),
    ".markdown": Format("markdown", _plain(base.read_markdown)),
    ".txt": Format("text", _plain(base.read_txt)),
    ".html": Format("html", _plain(base.read_html)),
    ".htm": Format("html", _plain(base.read_html)),
    ".pdf": Format("pdf", _plain(_read_pdf)),
    ".jsonl": Format("jsonl", _plain(base.read_jsonl)),
    ".csv": Format("csv", sheets.with_limit(sheets.read_csv)),
    ".tsv": Format("tsv", sheets.with_limit(sheets.read_tsv)),
    ".eml": Format("e-mail", _plain(partial(mail.read_eml, attachments=_attachment))),
    ".mbox": Format("mbox", _plain(partial(mail.read_mbox, attachments=_attachment))),
    ".docx": Format("docx", _plain(office.read_docx), DOCS),
    ".pptx": Format("pptx", _plain(office.read_pptx), DOCS),
    ".odt": Format("odt", _plain(office.read_odt), DOCS),
    ".rtf": Format("rtf", _plain(office.read_rtf), DOCS),
    ".xlsx": Format("xlsx", sheets.with_limit(sheets.read_xlsx), DOCS),
    ".ods": Format("ods", sheets.with_limit(sheets.read_ods), DOCS),
    ".epub": Format("epub", _plain(ebooks.read_epub), DOCS),
    ".png": Format("image", _plain(ocr.read_image), ocr.OCR_EXTRA),
    ".jpg": Format("image", _plain(ocr.read_image), ocr.OCR_EXTRA),
    ".jpeg": Format("image", _plain(ocr.read_image), ocr.OCR_EXTRA),
    ".tif": Format("image", _plain(ocr.read_image), ocr.OCR_EXTRA),
    ".tiff": Format("image", _plain(ocr.read_image), ocr.OCR_EXTRA),
}

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(FORMATS)


def missing_extra(extra: str) -> bool:
    return not all(module_installed(module) for module in _MODULES_OF_EXTRA.get(extra, ()))


def is_supported(path: Path) -> bool:
    return path.suffix.lower() in FORMATS


def kind_of(path: Path | str) -> str:
    found = FORMATS.get(Path(path).suffix.lower())
    return found.kind if found is not None else "other"


def read_file(path: Path, data: bytes) -> tuple[list[CorpusDocument], str | None]:
    """A file's documents and what a limit cut from it (None when nothing was); raises DocumentParseError."""
    found = FORMATS.get(path.suffix.lower())
    if found is None:
        raise DocumentParseError(f"unsupported file type: {path.name}")
    if found.extra and missing_extra(found.extra):
        raise MissingExtraError(f"needs the `{found.extra}` extra: {install_hint(found.extra)}", extra=found.extra)
    return found.read(path, data)


def release_workers() -> None:
    """Free what a reader kept between files (the OCR worker process and its models): a folder is done."""
    ocr.release_worker()


def read_documents(path: Path, data: bytes) -> list[CorpusDocument]:
    return read_file(path, data)[0]
