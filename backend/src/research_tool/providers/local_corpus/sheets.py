"""Spreadsheets and delimited text: .xlsx (openpyxl, read-only: rows streamed), .ods (content.xml with
defusedxml), .csv and .tsv (the standard library).

Each row becomes one document whose text is one sentence pairing its cells with the sheet's header row
("Adult: Annual fee £180; Monthly fee £15."), and whose title names the file, the sheet and the row
("fees.xlsx, sheet Prices, row 3"), so a citation points at the row. At most MAX_ROWS rows are read from one
file (a sheet of a million rows is cut there, and the index says so) and MAX_COLUMNS cells from one row.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import io
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from research_tool.providers.local_corpus.archives import open_zip
from research_tool.providers.local_corpus.documents import (
    CorpusDocument,
    DocumentParseError,
    decode_text,
    row_sentence,
)
from research_tool.providers.local_corpus.office import ODF_NS, need, odf_content, odf_rows

MAX_ROWS = 10_000
MAX_COLUMNS = 200
_TABLE = "{" + ODF_NS["table"] + "}"


class RowLimit:
    """Counts rows across a file's sheets; `cut` says whether rows were left out."""

    def __init__(self) -> None:
        self.left = MAX_ROWS
        self.cut = False


def cell_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return " ".join(str(value).split())


def sheet_documents(
    path: Path, sheet: str | None, rows: Iterable[tuple[int, list[str]]], limit: RowLimit
) -> list[CorpusDocument]:
    """(row number, cells) -> one document a row after the header (the first row with two or more cells)."""
    documents: list[CorpusDocument] = []
    header: list[str] | None = None
    where = f"{path.name}, sheet {sheet}" if sheet else path.name
    for number, cells in rows:
        cells = [cell_text(c) for c in cells[:MAX_COLUMNS]]
        while cells and not cells[-1]:
            cells.pop()
        if not cells:
            continue
        if header is None and (len(cells) > 1 or not documents):
            header = cells
            continue
        if limit.left <= 0:
            limit.cut = True
            break
        limit.left -= 1
        if header and len(cells) < len(header):
            cells += [""] * (len(header) - len(cells))
        text = row_sentence(header or [], cells)
        if not text:
            continue
        key = f"{sheet}!{number}" if sheet else f"row-{number}"
        documents.append(CorpusDocument(key=key, title=f"{where}, row {number}", text=text))
    return documents


# --- xlsx ---------------------------------------------------------------------------------------


def _xlsx_streamed(name: str) -> bool:
    return name.startswith("xl/worksheets/") and name.endswith(".xml")


def read_xlsx(path: Path, data: bytes, limit: RowLimit | None = None) -> list[CorpusDocument]:
    openpyxl = need("openpyxl")
    need("defusedxml")  # openpyxl parses with defusedxml when it is installed
    limit = limit or RowLimit()
    open_zip(data, path, streamed=_xlsx_streamed)
    documents: list[CorpusDocument] = []
    try:
        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        try:
            for sheet in book.worksheets:
                rows = ((n, list(values)) for n, values in enumerate(sheet.iter_rows(values_only=True), start=1))
                documents += sheet_documents(path, sheet.title, rows, limit)
                if limit.cut:
                    break
        finally:
            book.close()
    except DocumentParseError:
        raise
    except Exception as exc:  # openpyxl raises KeyError, ValueError, InvalidFileException, lxml / defusedxml errors
        raise DocumentParseError(f"cannot read xlsx {path.name}: {exc}") from exc
    return documents


# --- ods ----------------------------------------------------------------------------------------


def read_ods(path: Path, data: bytes, limit: RowLimit | None = None) -> list[CorpusDocument]:
    limit = limit or RowLimit()
    content, _title = odf_content(data, path)
    body = content.find("office:body/office:spreadsheet", ODF_NS)
    if body is None:
        raise DocumentParseError(f"{path.name} holds no spreadsheet")
    documents: list[CorpusDocument] = []
    for table in body.iter(f"{_TABLE}table"):
        name = table.get(f"{_TABLE}name") or "Sheet"
        documents += sheet_documents(path, name, enumerate(odf_rows(table), start=1), limit)
        if limit.cut:
            break
    return documents


# --- csv / tsv ----------------------------------------------------------------------------------


def _delimited_rows(text: str, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    csv.field_size_limit(1_000_000)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        yield from enumerate(reader, start=1)
    except csv.Error as exc:
        raise DocumentParseError(f"bad delimited text: {exc}") from exc


def read_csv(path: Path, data: bytes, limit: RowLimit | None = None) -> list[CorpusDocument]:
    text = decode_text(data)
    delimiter = ","
    with contextlib.suppress(csv.Error):
        delimiter = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|").delimiter
    return sheet_documents(path, None, _delimited_rows(text, delimiter), limit or RowLimit())


def read_tsv(path: Path, data: bytes, limit: RowLimit | None = None) -> list[CorpusDocument]:
    return sheet_documents(path, None, _delimited_rows(decode_text(data), "\t"), limit or RowLimit())


def cut_note(limit: RowLimit) -> str | None:
    return f"cut at {MAX_ROWS} rows" if limit.cut else None


def with_limit(reader: Any) -> Any:
    """A sheet reader as (path, data) -> (documents, what was cut or None)."""

    def read(path: Path, data: bytes) -> tuple[list[CorpusDocument], str | None]:
        limit = RowLimit()
        documents = reader(path, data, limit)
        return documents, cut_note(limit)

    return read
