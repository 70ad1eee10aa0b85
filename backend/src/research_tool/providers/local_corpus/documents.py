"""Reading local documents out of files: md, txt, html, pdf, and .jsonl (one document a line); the document type,
the errors a reader raises (each with the reason `index` names it by) and the readers' shared pieces. The other
formats (office files, sheets, e-books, mail, OCR) have modules of their own; formats.py maps suffixes to them.

Each reader turns a file's bytes into `CorpusDocument`s (title, text, and for jsonl lines their id
and own url). Readers are pure functions of the bytes, so the index can hash a file, skip it when
unchanged, and parse it only when its content really changed.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from research_tool.core.errors import ResearchToolError
from research_tool.core.logging import get_logger
from research_tool.core.untrusted_text import clean_text

log = get_logger(__name__)

MAX_TITLE_CHARS = 200


class DocumentParseError(ResearchToolError):
    """A file could not be read as a document (broken pdf, undecodable bytes...). `reason` is the word
    `research-tool index` names the skipped file with."""

    error_type = "document_parse_error"
    reason = "corrupt"


class EncryptedDocumentError(DocumentParseError):
    """A password-protected file (an encrypted PDF, an encrypted Office or OpenDocument file)."""

    error_type = "encrypted_document"
    reason = "encrypted"


class DocumentLimitError(DocumentParseError):
    """A file past one of the documented limits of what is read from one file (docs/documents.md): a zip member
    or all members together too large once unpacked, XML that declares entities, an image of too many pixels."""

    error_type = "document_limit"
    reason = "limit hit"


class MissingExtraError(DocumentParseError):
    """A format whose reader needs an optional extra that is not installed."""

    error_type = "missing_extra"
    reason = "needs an extra"

    def __init__(self, message: str, *, extra: str) -> None:
        super().__init__(message)
        self.extra = extra


@dataclass(frozen=True)
class CorpusDocument:
    """One searchable document. `key` is its id inside the file ("" for a one-document file).

    Built by every reader, so this is where a local document's text enters: control characters (NUL...) are
    removed here (core/untrusted_text.py)."""

    key: str
    title: str
    text: str
    url: str | None = None

    def __post_init__(self) -> None:
        for name in ("key", "title", "text", "url"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, clean_text(value))


class OutsideRootError(DocumentParseError):
    """A file (usually a symlink) whose real path is not under the corpus folder it was found in."""

    error_type = "outside_corpus_root"
    reason = "outside the folder"


def resolves_inside(path: Path, root: Path) -> bool:
    """True when `path`, with every symlink resolved, is `root` itself or lies under it."""
    try:
        real = path.resolve(strict=True)
        real_root = root.resolve(strict=True)
    except (OSError, RuntimeError):  # missing, unreadable, or a symlink loop
        return False
    return real == real_root or real.is_relative_to(real_root)


class NotRegularFileError(DocumentParseError):
    """A FIFO, socket or device under a corpus folder: never opened for reading (a FIFO would block forever)."""

    error_type = "not_a_regular_file"
    reason = "not a regular file"


class FileTooLargeError(DocumentParseError):
    """A file over RESEARCH_CORPUS_MAX_FILE_MB: skipped, so one huge file cannot exhaust memory or time."""

    error_type = "file_too_large"
    reason = "too large"


def read_bytes_inside(path: Path, root: Path, *, max_bytes: int | None = None) -> bytes:
    """The bytes of `path`, refusing any file whose real path leaves `root`, any file that is not a regular file,
    and (with `max_bytes`) any file longer than that.

    The check is made again at read time (a file may be swapped for a symlink after the walk saw it):
    the resolved path is checked, then opened with O_NOFOLLOW and compared by inode with what was
    checked, so a symlink planted in between is refused too. It is opened with O_NONBLOCK, so a FIFO swapped in
    does not block the open, and refused by the opened descriptor's type; at most `max_bytes + 1` bytes are read,
    so a file that grew after the walk is refused without being read whole.
    """
    if not resolves_inside(path, root):
        raise OutsideRootError(f"{path} resolves outside its corpus folder {root}")
    real = path.resolve(strict=True)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        if exc.errno == getattr(os, "ELOOP", -1):
            raise OutsideRootError(f"{path} became a symlink while being read") from exc
        raise
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(handle.fileno())
        checked = real.stat()
        if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino) or not resolves_inside(path, root):
            raise OutsideRootError(f"{path} changed while being read")
        if not stat.S_ISREG(opened.st_mode):
            raise NotRegularFileError(f"{path} is not a regular file")
        if max_bytes is None:
            return handle.read()
        if opened.st_size > max_bytes:
            raise FileTooLargeError(f"{path} is over the size limit ({opened.st_size} > {max_bytes} bytes)")
        data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise FileTooLargeError(f"{path} grew over the size limit ({max_bytes} bytes) while being read")
        return data


def decode_text(data: bytes) -> str:
    """UTF-8 (with or without BOM); bytes that are not UTF-8 are replaced, never fatal."""
    return data.decode("utf-8-sig", errors="replace")


def _clean_title(title: str) -> str:
    title = re.sub(r"\s+", " ", title).strip()
    if len(title) > MAX_TITLE_CHARS:
        title = title[: MAX_TITLE_CHARS - 1].rstrip() + "…"
    return title


def _first_line_title(text: str, fallback: str, *, max_chars: int = 150) -> str:
    """The first non-empty line when it is short enough to be a title, else `fallback`."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped:
            return _clean_title(stripped) if len(stripped) <= max_chars else fallback
    return fallback


def _text_title(text: str, fallback: str) -> str:
    """Title for a document that has no title field: its first words."""
    words = text.split()
    if not words:
        return fallback
    head = " ".join(words[:12])
    return _clean_title(head + ("…" if len(words) > 12 else ""))


clean_title = _clean_title
first_line_title = _first_line_title


# --- tables -------------------------------------------------------------------------------------


def row_sentence(header: list[str], cells: list[str]) -> str:
    """A table row as a sentence that pairs each cell with its column's header: "Adult (18 and over): Annual fee
    £180; Monthly direct debit £15." (the row's first cell names it); a row without a matching header joins its
    cells with semicolons. Empty cells are left out."""
    cells = [" ".join(c.split()) for c in cells]
    if not any(cells):
        return ""
    if len(header) == len(cells) and len(cells) > 1:
        pairs = [f"{h} {c}".strip() for h, c in zip(header[1:], cells[1:], strict=True) if c]
        text = f"{cells[0]}: {'; '.join(pairs)}" if cells[0] else "; ".join(pairs)
    else:
        text = "; ".join(c for c in cells if c)
    return text if text.endswith((".", "!", "?")) else f"{text}."


_MD_TABLE_LINE = re.compile(r"^\s*\|.*\|\s*$")
_MD_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")


def _md_cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def markdown_tables_as_sentences(text: str) -> str:
    """Every pipe table (a header line, a rule line, rows) becomes one sentence a row, each its own paragraph."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if i + 1 < len(lines) and _MD_TABLE_LINE.match(lines[i]) and _MD_TABLE_RULE.match(lines[i + 1]):
            header = _md_cells(lines[i])
            i += 2
            rows = []
            while i < len(lines) and _MD_TABLE_LINE.match(lines[i]):
                rows.append(row_sentence(header, _md_cells(lines[i])))
                i += 1
            out.append("\n\n".join(r for r in rows if r) + "\n")
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


# --- txt ----------------------------------------------------------------------------------------


def read_txt(path: Path, data: bytes) -> list[CorpusDocument]:
    text = decode_text(data)
    if not text.strip():
        return []
    return [CorpusDocument(key="", title=_first_line_title(text, path.stem), text=text.strip())]


# --- markdown -----------------------------------------------------------------------------------

_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n(?:---|\.\.\.)\s*(?:\n|\Z)", re.DOTALL)
_FRONT_MATTER_TITLE = re.compile(r"^title:\s*(.+?)\s*$", re.MULTILINE)
_ATX_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_SETEXT_HEADING = re.compile(r"^(\S[^\n]*)\n\s{0,3}(?:=+|-+)\s*$", re.MULTILINE)
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def read_markdown(path: Path, data: bytes) -> list[CorpusDocument]:
    text = decode_text(data)
    title = ""
    front = _FRONT_MATTER.match(text)
    if front:
        found = _FRONT_MATTER_TITLE.search(front.group(1))
        if found:
            title = found.group(1).strip().strip("'\"")
        text = text[front.end() :]
    text = markdown_tables_as_sentences(_HTML_COMMENT.sub("", text)).strip()
    if not text:
        return []
    if not title:
        atx = _ATX_HEADING.search(text)
        setext = _SETEXT_HEADING.search(text)
        candidates = [m for m in (atx, setext) if m is not None]
        if candidates:
            title = min(candidates, key=lambda m: m.start()).group(1)
    title = _clean_title(title) if title.strip() else _first_line_title(text, path.stem)
    return [CorpusDocument(key="", title=title, text=text)]


# --- html ---------------------------------------------------------------------------------------

_SKIPPED_TAGS = frozenset(
    {"script", "style", "noscript", "template", "svg", "nav", "header", "footer", "aside", "form", "iframe", "head"}
)
_MAIN_TAGS = frozenset({"main", "article"})
_BLOCK_TAGS = frozenset(
    {
        "p", "div", "br", "li", "ul", "ol", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6",
        "tr", "table", "pre", "section", "article", "main", "blockquote", "figure", "figcaption", "hr",
    }
)  # fmt: skip
_VOID_TAGS = frozenset({"br", "hr", "img", "meta", "link", "input", "area", "base", "col", "embed", "source", "wbr"})


_HEADING_TAGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_CELL_TAGS = frozenset({"td", "th"})
# breadcrumbs and cookie banners are page furniture, not content (class, id or aria-label naming them)
_FURNITURE_RE = re.compile(r"breadcrumb|cookie|consent|skip-link|site-header|site-footer", re.IGNORECASE)


class _HtmlTextExtractor(HTMLParser):
    """Collects the page's <title>, first <h1>, all body text and the text inside <main>/<article>. Blocks are
    separated by blank lines (a heading never runs into the paragraph after it), a heading is written as a
    markdown heading line (so no sentence is made of it) and a table row as one sentence pairing each cell with
    its header (`row_sentence`)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._header: list[str] = []
        self._row: list[list[str]] | None = None
        self._row_is_header = False
        self._furniture: list[str] = []  # the tags of open page-furniture elements
        self.title_parts: list[str] = []
        self.h1_parts: list[str] = []
        self.body_parts: list[str] = []
        self.main_parts: list[str] = []
        self._skip_depth = 0
        self._main_depth = 0
        self._in_title = False
        self._in_h1 = False
        self._h1_done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
            return
        if self._furniture or (
            tag not in _VOID_TAGS
            and any(k in ("class", "id", "aria-label") and v and _FURNITURE_RE.search(v) for k, v in attrs)
        ):
            if tag not in _VOID_TAGS:
                self._furniture.append(tag)
            return
        if tag == "table":
            self._header = []
        elif tag == "tr":
            self._row, self._row_is_header = [], True
        elif tag in _CELL_TAGS and self._row is not None:
            self._row.append([])
            self._row_is_header = self._row_is_header and tag == "th"
            return
        if tag in _VOID_TAGS:
            if tag in _BLOCK_TAGS:
                self._newline()
            return
        if tag in _SKIPPED_TAGS:
            self._skip_depth += 1
        elif tag in _MAIN_TAGS:
            self._main_depth += 1
        elif tag == "h1" and not self._h1_done:
            self._in_h1 = True
        if tag in _BLOCK_TAGS:
            self._newline()
        if tag in _HEADING_TAGS:
            self._emit("## ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
            return
        if self._furniture:
            if tag == self._furniture[-1]:
                self._furniture.pop()
            return
        if tag in _CELL_TAGS and self._row is not None:
            return
        if tag == "tr" and self._row is not None:
            cells = ["".join(c).strip() for c in self._row]
            if (self._row_is_header and not self._header) or (not self._header and not any(cells[1:])):
                self._header = cells
            else:
                self._newline()
                self._emit(row_sentence(self._header, cells))
                self._newline()
            self._row = None
            return
        if tag in _SKIPPED_TAGS and self._skip_depth:
            self._skip_depth -= 1
        elif tag in _MAIN_TAGS and self._main_depth:
            self._main_depth -= 1
        elif tag == "h1" and self._in_h1:
            self._in_h1 = False
            self._h1_done = True
        if tag in _BLOCK_TAGS:
            self._newline()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title_parts.append(data)
            return
        if self._skip_depth or self._furniture:
            return
        if self._in_h1:
            self.h1_parts.append(data)
        if self._row is not None:
            if self._row:
                self._row[-1].append(data)
            return
        self._emit(data)

    def _emit(self, text: str) -> None:
        if self._skip_depth:
            return
        self.body_parts.append(text)
        if self._main_depth:
            self.main_parts.append(text)

    def _newline(self) -> None:
        self._emit("\n\n")


def _join_html_text(parts: list[str]) -> str:
    """Blocks separated by one blank line, white space inside a line folded, empty headings dropped."""
    blocks = []
    for block in re.split(r"\n\s*\n", "".join(parts)):
        lines = [re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in block.split("\n")]
        text = "\n".join(line for line in lines if line)
        if text and text.strip("# "):
            blocks.append(text)
    return "\n\n".join(blocks)


def read_html(path: Path, data: bytes) -> list[CorpusDocument]:
    extractor = _HtmlTextExtractor()
    extractor.feed(decode_text(data))
    extractor.close()
    main_text = _join_html_text(extractor.main_parts)
    body_text = _join_html_text(extractor.body_parts)
    # Prefer the page's <main>/<article> when it holds real content; otherwise the whole body.
    text = main_text if len(main_text) >= 0.2 * len(body_text) and main_text else body_text
    if not text:
        return []
    title = _clean_title("".join(extractor.title_parts)) or _clean_title("".join(extractor.h1_parts))
    return [CorpusDocument(key="", title=title or path.stem, text=text)]


# --- pdf ----------------------------------------------------------------------------------------


# OCR of a page without a text layer: (the pypdf page, the file's name) -> its text; raises MissingExtraError
# when OCR is not installed. Given by the format registry (formats.py) when the `ocr` extra is there.
ScannedPageReader = Callable[[Any, str], str]
MAX_SCANNED_PAGES = 200  # pages of one PDF read through OCR; the rest of a longer scan is left out


def read_pdf(path: Path, data: bytes, scanned_page: ScannedPageReader | None = None) -> list[CorpusDocument]:
    """The text layer as one document; pages without one (a scan) read through `scanned_page` (OCR), each its
    own document `#page-N` titled "<title>, page N", so the citation names the page. A PDF whose password is
    not empty is `encrypted`; a scan with no OCR installed raises MissingExtraError."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # pypdf warns loudly about harmless quirks
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise EncryptedDocumentError(f"{path.name} is a password-protected PDF")
        pages = [page.extract_text() or "" for page in reader.pages]
        meta_title = reader.metadata.title if reader.metadata else None
    except DocumentParseError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, NotImplementedError) as exc:
        if "decrypt" in str(exc).lower() or "password" in str(exc).lower():
            raise EncryptedDocumentError(f"{path.name} is an encrypted PDF ({exc})") from exc
        raise DocumentParseError(f"cannot read pdf {path.name}: {exc}") from exc
    text = "\n\n".join(page.strip() for page in pages if page.strip())
    title = _clean_title(str(meta_title)) if meta_title and str(meta_title).strip() else ""
    if not title or title.lower() in {"untitled", "microsoft word"} or title.lower().endswith((".doc", ".docx")):
        title = _first_line_title(text, path.stem) if text else path.stem
    documents = [CorpusDocument(key="", title=title, text=text)] if text else []
    blank = [number for number, page in enumerate(pages, start=1) if not page.strip()]
    if blank and scanned_page is not None:
        for number in blank[:MAX_SCANNED_PAGES]:
            try:
                page_text = scanned_page(reader.pages[number - 1], f"{path.name} page {number}")
            except MissingExtraError:
                if documents:  # the text layer is kept; the scanned pages wait for the extra
                    break
                raise
            if page_text.strip():
                documents.append(CorpusDocument(key=f"page-{number}", title=f"{title}, page {number}", text=page_text))
    return documents


# --- jsonl --------------------------------------------------------------------------------------


def read_jsonl(path: Path, data: bytes) -> list[CorpusDocument]:
    """One document a line: `{id or _id, title, text, url?}`. Bad lines are skipped and logged."""
    documents: list[CorpusDocument] = []
    seen: set[str] = set()
    bad_lines = 0
    for line_no, line in enumerate(decode_text(data).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            bad_lines += 1
            continue
        if not isinstance(record, dict):
            bad_lines += 1
            continue
        raw_id = record.get("id", record.get("_id"))
        key = str(raw_id) if raw_id is not None and str(raw_id).strip() else str(line_no)
        text = record.get("text") or record.get("contents") or ""
        title = record.get("title") or ""
        if not isinstance(text, str) or not isinstance(title, str) or not (text.strip() or title.strip()):
            bad_lines += 1
            continue
        if key in seen:
            bad_lines += 1
            continue
        seen.add(key)
        url = record.get("url")
        documents.append(
            CorpusDocument(
                key=key,
                title=_clean_title(title) or _text_title(text, f"{path.name}#{key}"),
                text=text.strip() or title.strip(),
                url=url.strip() if isinstance(url, str) and url.strip() else None,
            )
        )
    if bad_lines:
        log.warning("jsonl_lines_skipped", file=str(path), skipped=bad_lines, kept=len(documents))
    return documents
