"""Opening the zip containers of office documents and e-books (docx, pptx, xlsx, odt, ods, epub) within bounds.

Every such file is a zip of XML parts. Before any library parses one, the archive is checked here:
- it must be a zip at all (a truncated or fake one is `corrupt`);
- at most MAX_MEMBERS members, each part that is parsed whole at most MAX_XML_MEMBER_BYTES once unpacked, and all
  such parts together at most MAX_UNPACKED_BYTES (a "zip bomb" docx, 1.5 GB of XML in a 1.5 MB file, is refused
  from its directory, before one byte is inflated); parts a reader streams (an xlsx worksheet, read row by row and
  cut at the row limit) count only toward MAX_STREAMED_BYTES;
- no XML part may declare entities or reference external ones in its prologue ("billion laughs", XXE): the
  prologue of every XML part is read with expat up to its first element, and a declaration refuses the file.

Zip's reader never inflates past a member's declared size, so the sizes checked are the sizes read.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO
from xml.parsers import expat

from research_tool.providers.local_corpus.documents import (
    DocumentLimitError,
    DocumentParseError,
    EncryptedDocumentError,
)

MAX_MEMBERS = 5_000
MAX_XML_MEMBER_BYTES = 32 * 1024 * 1024
MAX_UNPACKED_BYTES = 160 * 1024 * 1024
MAX_STREAMED_BYTES = 2 * 1024 * 1024 * 1024
_PROLOGUE_CHUNK = 64 * 1024
# An OLE compound file: what Office writes for a password-protected docx/xlsx/pptx (and for old .doc/.xls).
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


class _PrologueDone(Exception):
    """Raised by the expat handler at the first element: the prologue is over."""


class _EntityDeclared(Exception):
    pass


def _is_xml(name: str) -> bool:
    return name.lower().endswith((".xml", ".rels", ".xhtml", ".html", ".htm", ".opf", ".ncx", ".vml"))


def check_xml_prologue(stream: IO[bytes], name: str) -> None:
    """Refuse an XML part whose prologue declares an entity (internal or external) or references an external
    one: nothing a document format needs, and what billion-laughs and XXE files are made of."""
    parser = expat.ParserCreate()

    def refuse(*_args: object) -> int:
        raise _EntityDeclared

    def done(*_args: object) -> None:
        raise _PrologueDone

    parser.EntityDeclHandler = refuse
    parser.UnparsedEntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    parser.StartElementHandler = done
    try:
        while True:
            chunk = stream.read(_PROLOGUE_CHUNK)
            parser.Parse(chunk, not chunk)
            if not chunk:
                return
    except _PrologueDone:
        return
    except _EntityDeclared:
        raise DocumentLimitError(
            f"{name} declares XML entities (refused: billion laughs / external entities)"
        ) from None
    except expat.ExpatError:
        return  # not well-formed: the reader's own parser says so, within the size checked above


def open_zip(
    data: bytes, path: Path, *, streamed: Callable[[str], bool] | None = None, check_xml: bool = True
) -> zipfile.ZipFile:
    """The archive of an office document or e-book, checked as the module says; raises DocumentParseError
    (corrupt), EncryptedDocumentError or DocumentLimitError."""
    if data.startswith(_OLE_MAGIC):
        raise EncryptedDocumentError(f"{path.name} is a password-protected (or legacy binary) Office file")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise DocumentParseError(f"{path.name} is not a readable zip archive ({exc})") from exc
    if len(members) > MAX_MEMBERS:
        raise DocumentLimitError(f"{path.name} holds {len(members)} parts (limit {MAX_MEMBERS})")
    whole = 0
    streaming = 0
    for member in members:
        if member.flag_bits & 0x1:
            raise EncryptedDocumentError(f"{path.name} has encrypted parts")
        if streamed is not None and streamed(member.filename):
            streaming += member.file_size
            continue
        if _is_xml(member.filename) and member.file_size > MAX_XML_MEMBER_BYTES:
            raise DocumentLimitError(
                f"{path.name}: part {member.filename} unpacks to {member.file_size} bytes "
                f"(limit {MAX_XML_MEMBER_BYTES}; a zip bomb?)"
            )
        whole += member.file_size
    if whole > MAX_UNPACKED_BYTES:
        raise DocumentLimitError(f"{path.name} unpacks to {whole} bytes (limit {MAX_UNPACKED_BYTES}; a zip bomb?)")
    if streaming > MAX_STREAMED_BYTES:
        raise DocumentLimitError(f"{path.name} unpacks to {streaming} bytes of sheets (limit {MAX_STREAMED_BYTES})")
    if check_xml:
        for member in members:
            if _is_xml(member.filename) and not member.is_dir():
                try:
                    with archive.open(member) as stream:
                        check_xml_prologue(stream, f"{path.name}: {member.filename}")
                except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
                    raise DocumentParseError(f"{path.name}: part {member.filename} is damaged ({exc})") from exc
    return archive


def read_member(archive: zipfile.ZipFile, name: str, path: Path) -> bytes:
    """One part's bytes (its size was checked by `open_zip`); a missing or damaged part is `corrupt`."""
    try:
        return archive.read(name)
    except KeyError as exc:
        raise DocumentParseError(f"{path.name} has no part {name}") from exc
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
        raise DocumentParseError(f"{path.name}: part {name} is damaged ({exc})") from exc
