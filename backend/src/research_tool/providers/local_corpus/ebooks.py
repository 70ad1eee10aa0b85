"""E-books: .epub, read as the zip it is (checked by `archives.open_zip`): META-INF/container.xml names the
package (OPF, parsed with defusedxml), whose spine lists the chapters in reading order; each chapter's XHTML is
read by the same HTML reader as a web page (headings as headings, tables as sentences). One document a chapter,
`#chapter-N`, titled "<book>, chapter N: <the chapter's heading>". DRM-protected books (META-INF/encryption.xml
naming content files) are skipped as encrypted.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from urllib.parse import unquote

from research_tool.providers.local_corpus.archives import open_zip, read_member
from research_tool.providers.local_corpus.documents import (
    CorpusDocument,
    DocumentParseError,
    EncryptedDocumentError,
    clean_title,
    read_html,
)
from research_tool.providers.local_corpus.office import join_blocks, need

MAX_CHAPTERS = 2_000
_CONTAINER_NS = {"c": "urn:oasis:names:tc:opendocument:xmlns:container"}
_OPF_NS = {"opf": "http://www.idpf.org/2007/opf", "dc": "http://purl.org/dc/elements/1.1/"}
_CHAPTER_TYPES = {"application/xhtml+xml", "text/html", "application/x-dtbook+xml"}


def read_epub(path: Path, data: bytes) -> list[CorpusDocument]:
    defused = need("defusedxml.ElementTree")
    archive = open_zip(data, path)
    names = set(archive.namelist())
    try:
        if "META-INF/encryption.xml" in names:
            encryption = defused.fromstring(read_member(archive, "META-INF/encryption.xml", path))
            if any(el.tag.endswith("EncryptedData") for el in encryption.iter()):
                raise EncryptedDocumentError(f"{path.name} is DRM-protected")
        container = defused.fromstring(read_member(archive, "META-INF/container.xml", path))
        rootfile = container.find(".//c:rootfile", _CONTAINER_NS)
        opf_path = rootfile.get("full-path", "") if rootfile is not None else ""
        package = defused.fromstring(read_member(archive, opf_path, path))
    except DocumentParseError:
        raise
    except Exception as exc:  # ParseError and defusedxml's refusals
        raise DocumentParseError(f"cannot read epub {path.name}: {exc}") from exc
    base = posixpath.dirname(opf_path)
    found = package.find(".//dc:title", _OPF_NS)
    book = clean_title(found.text or "") if found is not None and found.text else path.stem
    manifest = {
        item.get("id"): (item.get("href") or "", item.get("media-type") or "")
        for item in package.iterfind(".//opf:manifest/opf:item", _OPF_NS)
    }
    documents: list[CorpusDocument] = []
    spine = list(package.iterfind(".//opf:spine/opf:itemref", _OPF_NS))[:MAX_CHAPTERS]
    for itemref in spine:
        href, media = manifest.get(itemref.get("idref"), ("", ""))
        if not href or media not in _CHAPTER_TYPES:
            continue
        member = posixpath.normpath(posixpath.join(base, unquote(href)))
        if member not in names:
            continue
        chapter = read_html(Path(member), read_member(archive, member, path))
        if not chapter:
            continue
        text = join_blocks([chapter[0].text])
        number = len(documents) + 1
        heading = chapter[0].title if chapter[0].title != Path(member).stem else ""
        title = f"{book}, chapter {number}" + (f": {heading}" if heading and heading != book else "")
        documents.append(CorpusDocument(key=f"chapter-{number}", title=clean_title(title), text=text))
    return documents
