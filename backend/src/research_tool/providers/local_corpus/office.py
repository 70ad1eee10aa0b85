"""Word-processor and slide files: .docx (python-docx), .pptx (python-pptx), .odt (its content.xml, read with
defusedxml) and .rtf (striprtf). The `documents` extra.

The text keeps the structure the answer reader relies on (docs/documents.md): a heading is a line of its own
written `## Heading` (never glued to the sentence after it), a paragraph or list item is its own block ending in
a full stop, and a table row is one sentence pairing each cell with its column's header (`row_sentence`).
A deck gives one document per slide (`#slide-N`, its title naming the slide); comments are left out.
Every zip is opened through `archives.open_zip` (size and XML-entity checks) before a library parses it.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from research_tool.core.extras import install_hint
from research_tool.providers.local_corpus.archives import open_zip, read_member
from research_tool.providers.local_corpus.documents import (
    CorpusDocument,
    DocumentParseError,
    EncryptedDocumentError,
    MissingExtraError,
    clean_title,
    decode_text,
    first_line_title,
    row_sentence,
)

DOCUMENTS_EXTRA = "documents"
MAX_TEXT_CHARS = 5_000_000  # text kept from one file; past it the rest is cut (a limit hit)


def need(module: str) -> Any:
    """Import an optional library of the `documents` extra, or say which extra to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"needs the `{DOCUMENTS_EXTRA}` extra: {install_hint(DOCUMENTS_EXTRA)}", extra=DOCUMENTS_EXTRA
        ) from exc


def sentence(text: str) -> str:
    """A block of text folded to one line, ending in a full stop unless it already ends a sentence."""
    text = " ".join(text.split())
    if not text:
        return ""
    return text if text.endswith((".", "!", "?", ":", ";", "…", '"', "”", ")")) else f"{text}."


def heading(text: str) -> str:
    text = " ".join(text.split())
    return f"## {text}" if text else ""


def table_sentences(rows: Iterable[list[str]]) -> list[str]:
    """Rows of cells -> one sentence a row; the first row with text is the header."""
    header: list[str] | None = None
    out: list[str] = []
    for cells in rows:
        cells = [" ".join(c.split()) for c in cells]
        cells = _merged(cells)
        if not any(cells):
            continue
        if header is None:
            header = cells
            if len(cells) == 1:
                out.append(sentence(cells[0]))
            continue
        line = row_sentence(header, cells)
        if line:
            out.append(line)
    return out


def _merged(cells: list[str]) -> list[str]:
    """python-docx repeats a merged cell in every grid column it spans: keep it once (the rest emptied)."""
    return [c if i == 0 or c != cells[i - 1] else "" for i, c in enumerate(cells)]


def join_blocks(blocks: Iterable[str]) -> str:
    text = "\n\n".join(b for b in blocks if b and b.strip())
    return text[:MAX_TEXT_CHARS]


# --- docx ---------------------------------------------------------------------------------------

_DOCX_HEADING = re.compile(r"^(heading \d|title|subtitle)$", re.IGNORECASE)


def _docx_paragraph(paragraph: Any) -> str:
    text = paragraph.text
    if not text.strip():
        return ""
    style = (paragraph.style.name if paragraph.style is not None else "") or ""
    if _DOCX_HEADING.match(style.strip()):
        return heading(text)
    return sentence(text)


def _docx_table(table: Any) -> list[str]:
    rows = []
    for row in table.rows:
        rows.append([cell.text for cell in row.cells])
    return table_sentences(rows)


def _docx_blocks(container: Any) -> Iterator[str]:
    for item in container.iter_inner_content():
        if hasattr(item, "rows"):
            yield from _docx_table(item)
        else:
            yield _docx_paragraph(item)


def read_docx(path: Path, data: bytes) -> list[CorpusDocument]:
    docx = need("docx")
    open_zip(data, path)
    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(_docx_blocks(document))
        furniture: list[str] = []
        for section in document.sections:
            for part in (section.header, section.footer):
                if part is not None and not part.is_linked_to_previous:
                    furniture += [b for b in _docx_blocks(part) if b not in furniture]
        title = document.core_properties.title or ""
    except (ValueError, KeyError, AttributeError, TypeError, IndexError) as exc:
        raise DocumentParseError(f"cannot read docx {path.name}: {exc}") from exc
    except Exception as exc:  # python-docx raises its own PackageNotFoundError / lxml errors on broken parts
        if type(exc).__module__.startswith(("docx", "lxml")):
            raise DocumentParseError(f"cannot read docx {path.name}: {exc}") from exc
        raise
    text = join_blocks([*blocks, *furniture])
    if not text:
        return []
    return [CorpusDocument(key="", title=_title(title, text, path), text=text)]


def _title(meta: str, text: str, path: Path) -> str:
    meta = clean_title(meta or "")
    if meta and meta.lower() not in {"untitled", "presentation", "powerpoint presentation"}:
        return meta
    first = first_line_title(text, path.stem)
    return first.removeprefix("## ").rstrip(".") or path.stem


# --- pptx ---------------------------------------------------------------------------------------


def _shape_blocks(shape: Any, title_id: int | None) -> Iterator[str]:
    if shape.shape_id == title_id:
        return
    if hasattr(shape, "shapes"):  # a group
        for inner in shape.shapes:
            yield from _shape_blocks(inner, title_id)
        return
    if getattr(shape, "has_table", False):
        rows = [[cell.text for cell in row.cells] for row in shape.table.rows]
        yield from table_sentences(rows)
        return
    if getattr(shape, "has_text_frame", False):
        for paragraph in shape.text_frame.paragraphs:
            yield sentence(paragraph.text)


def read_pptx(path: Path, data: bytes) -> list[CorpusDocument]:
    pptx = need("pptx")
    open_zip(data, path)
    try:
        deck = pptx.Presentation(io.BytesIO(data))
        slides = []
        for number, slide in enumerate(deck.slides, start=1):
            title_shape = slide.shapes.title
            slide_title = " ".join((title_shape.text_frame.text if title_shape is not None else "").split())
            blocks = [heading(slide_title)] if slide_title else []
            title_id = title_shape.shape_id if title_shape is not None else None
            for shape in slide.shapes:
                blocks += list(_shape_blocks(shape, title_id))
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
                notes = slide.notes_slide.notes_text_frame.text
                blocks += [sentence(p) for p in notes.split("\n")]
            slides.append((number, slide_title, join_blocks(blocks)))
        meta_title = deck.core_properties.title or ""
    except (ValueError, KeyError, AttributeError, TypeError, IndexError) as exc:
        raise DocumentParseError(f"cannot read pptx {path.name}: {exc}") from exc
    except Exception as exc:
        if type(exc).__module__.startswith(("pptx", "lxml")):
            raise DocumentParseError(f"cannot read pptx {path.name}: {exc}") from exc
        raise
    first_title = next((t for _, t, _ in slides if t), "")
    deck_title = clean_title(meta_title) or clean_title(first_title) or path.stem
    documents = []
    for number, slide_title, text in slides:
        if not text:
            continue
        name = f"{deck_title}, slide {number}" + (
            f": {slide_title}" if slide_title and slide_title != deck_title else ""
        )
        documents.append(CorpusDocument(key=f"slide-{number}", title=clean_title(name), text=text))
    return documents


# --- OpenDocument text (.odt) -------------------------------------------------------------------

ODF_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
}
_T = "{" + ODF_NS["text"] + "}"
_TABLE = "{" + ODF_NS["table"] + "}"
_OFFICE = "{" + ODF_NS["office"] + "}"
MAX_REPEAT = 64  # a repeated cell or row (table:number-*-repeated) counts at most this many times


def odf_text(element: Any) -> str:
    """The text of an ODF paragraph: spaces (text:s), tabs and line breaks kept, notes and comments left out."""
    parts: list[str] = [element.text or ""]
    for child in element:
        tag = child.tag
        if tag == f"{_T}s":
            parts.append(" " * min(int(child.get(f"{_T}c", "1") or 1), MAX_REPEAT))
        elif tag in (f"{_T}tab", f"{_T}line-break"):
            parts.append(" ")
        elif tag in (f"{_OFFICE}annotation", f"{_OFFICE}annotation-end", f"{_T}note", f"{_T}bookmark-ref"):
            pass
        else:
            parts.append(odf_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def odf_rows(table: Any) -> Iterator[list[str]]:
    """A table:table's rows as lists of cell texts; repeated rows and cells are bounded (an empty one skipped)."""
    for row in table.iter(f"{_TABLE}table-row"):
        cells: list[str] = []
        for cell in row:
            if cell.tag not in (f"{_TABLE}table-cell", f"{_TABLE}covered-table-cell"):
                continue
            text = "\n".join(odf_text(p) for p in cell.iter(f"{_T}p"))
            repeat = int(cell.get(f"{_TABLE}number-columns-repeated", "1") or 1)
            cells += [text] * (min(repeat, MAX_REPEAT) if text.strip() else min(repeat, 1))
        while cells and not cells[-1].strip():
            cells.pop()
        if not cells:
            continue
        repeat = int(row.get(f"{_TABLE}number-rows-repeated", "1") or 1)
        for _ in range(min(repeat, MAX_REPEAT)):
            yield cells


def _odf_blocks(element: Any) -> Iterator[str]:
    for child in element:
        tag = child.tag
        if tag == f"{_T}h":
            yield heading(odf_text(child))
        elif tag == f"{_T}p":
            yield sentence(odf_text(child))
        elif tag == f"{_TABLE}table":
            yield from table_sentences(odf_rows(child))
        elif tag in (f"{_OFFICE}annotation", f"{_T}tracked-changes", f"{_T}sequence-decls"):
            continue
        else:  # lists, list items, sections, frames...
            yield from _odf_blocks(child)


def odf_content(data: bytes, path: Path) -> tuple[Any, str]:
    """The parsed content.xml of an OpenDocument file and its title (meta.xml's dc:title)."""
    defused = need("defusedxml.ElementTree")
    archive = open_zip(data, path)
    manifest = archive.read("META-INF/manifest.xml") if "META-INF/manifest.xml" in archive.namelist() else b""
    if b"encryption-data" in manifest:
        raise EncryptedDocumentError(f"{path.name} is password-protected")
    try:
        content = defused.fromstring(read_member(archive, "content.xml", path))
        title = ""
        if "meta.xml" in archive.namelist():
            found = defused.fromstring(read_member(archive, "meta.xml", path)).find(".//dc:title", ODF_NS)
            title = (found.text or "") if found is not None else ""
    except DocumentParseError:
        raise
    except Exception as exc:  # ParseError, and defusedxml's refusals of DTDs and entities
        raise DocumentParseError(f"cannot read {path.name}: {exc}") from exc
    return content, title


def read_odt(path: Path, data: bytes) -> list[CorpusDocument]:
    content, title = odf_content(data, path)
    body = content.find("office:body/office:text", ODF_NS)
    if body is None:
        raise DocumentParseError(f"{path.name} holds no text body")
    text = join_blocks(_odf_blocks(body))
    if not text:
        return []
    return [CorpusDocument(key="", title=_title(title, text, path), text=text)]


# --- rtf ----------------------------------------------------------------------------------------


def read_rtf(path: Path, data: bytes) -> list[CorpusDocument]:
    striprtf = need("striprtf.striprtf")
    raw = decode_text(data)
    if not raw.lstrip().startswith("{\\rtf"):
        raise DocumentParseError(f"{path.name} is not an RTF file")
    try:
        plain = striprtf.rtf_to_text(raw, errors="replace")
    except (ValueError, IndexError, UnicodeError) as exc:
        raise DocumentParseError(f"cannot read rtf {path.name}: {exc}") from exc
    text = join_blocks(sentence(line) for line in plain.splitlines())
    if not text:
        return []
    return [CorpusDocument(key="", title=_title("", text, path), text=text)]
