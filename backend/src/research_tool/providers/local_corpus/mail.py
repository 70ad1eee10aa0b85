"""E-mail: .eml (one message) and .mbox (many), with the standard library's `email` package (no extra).

A message is one document titled "<subject> (<date>)", the locator its citation carries; its text starts with
who sent it and when, then the plain-text part (or the HTML part read as a web page). Attachments in a format
the index reads (docx, pdf, xlsx...) become documents of their own (`#attachment-N`, or `#message-M/attachment-N`
in an mbox), titled with the message's subject and the attachment's name; attachments of attachments are not
opened. An mbox is cut at MAX_MESSAGES messages.
"""

from __future__ import annotations

import email
import email.policy
import re
from collections.abc import Callable
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from pathlib import Path

from research_tool.providers.local_corpus.documents import (
    CorpusDocument,
    DocumentParseError,
    clean_title,
    read_html,
)
from research_tool.providers.local_corpus.office import join_blocks

MAX_MESSAGES = 10_000
MAX_ATTACHMENTS = 50
_MBOX_SEPARATOR = re.compile(rb"^From [^\n]*\n", re.MULTILINE)

# (attachment name, its bytes) -> its documents; given by the format registry so that mail stays below it
AttachmentReader = Callable[[Path, bytes], list[CorpusDocument]]


def _header(message: EmailMessage, name: str) -> str:
    try:
        return " ".join(str(message.get(name, "") or "").split())
    except (ValueError, TypeError, IndexError):  # a malformed header the policy cannot parse
        return ""


def _date(message: EmailMessage) -> str:
    raw = _header(message, "Date")
    try:
        return parsedate_to_datetime(raw).strftime("%Y-%m-%d %H:%M") if raw else ""
    except (ValueError, TypeError, IndexError):
        return raw


def _body(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError):
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    if not isinstance(content, str):
        return ""
    if part.get_content_subtype() == "html":
        pages = read_html(Path("message.html"), content.encode("utf-8"))
        return pages[0].text if pages else ""
    return content


def message_documents(
    message: EmailMessage, fallback: str, key: str, attachments: AttachmentReader | None
) -> list[CorpusDocument]:
    subject = _header(message, "Subject") or fallback
    date = _date(message)
    sender = _header(message, "From")
    title = clean_title(f"{subject} ({date})" if date else subject)
    # a lead-in, not a statement: an answer quotes what the message says; the title carries subject and date
    lead = (f"{sender or 'The sender'} wrote" + (f" on {date}:" if date else ":")) if sender or date else ""
    body = _body(message).strip()
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()]
    text = join_blocks([f"## {subject}", lead, *paragraphs])
    documents = [CorpusDocument(key=key, title=title, text=text)] if body or lead else []
    if attachments is None:
        return documents
    for number, part in enumerate(message.iter_attachments(), start=1):
        if number > MAX_ATTACHMENTS:
            break
        name = part.get_filename() or ""
        payload = part.get_payload(decode=True)
        if not name or not isinstance(payload, bytes):
            continue
        name = Path(name.replace("\\", "/")).name
        try:
            found = attachments(Path(name), payload)
        except DocumentParseError:
            continue
        prefix = f"{key}/attachment-{number}" if key else f"attachment-{number}"
        for doc in found:
            documents.append(
                CorpusDocument(
                    key=f"{prefix}/{doc.key}" if doc.key else prefix,
                    title=clean_title(f"{subject}, attachment {name}: {doc.title}"),
                    text=doc.text,
                )
            )
    return documents


def _parse(data: bytes) -> EmailMessage:
    message = email.message_from_bytes(data, policy=email.policy.default)
    if not isinstance(message, EmailMessage):  # pragma: no cover - the default policy always makes one
        raise DocumentParseError("not an e-mail message")
    return message


def read_eml(path: Path, data: bytes, attachments: AttachmentReader | None = None) -> list[CorpusDocument]:
    message = _parse(data)
    if not message.keys():
        raise DocumentParseError(f"{path.name} has no e-mail headers")
    return message_documents(message, path.stem, "", attachments)


def starts_of_separators(data: bytes) -> list[int]:
    return [m.start() for m in _MBOX_SEPARATOR.finditer(data)]


def read_mbox(path: Path, data: bytes, attachments: AttachmentReader | None = None) -> list[CorpusDocument]:
    starts = [m.end() for m in _MBOX_SEPARATOR.finditer(data)]
    if not starts:
        raise DocumentParseError(f"{path.name} is not an mbox (no 'From ' line)")
    ends = [*starts_of_separators(data)[1:], len(data)]
    documents: list[CorpusDocument] = []
    for number, (start, end) in enumerate(zip(starts, ends, strict=True), start=1):
        if number > MAX_MESSAGES:
            break
        raw = re.sub(rb"(?m)^>From ", b"From ", data[start:end])
        documents += message_documents(_parse(raw), f"{path.stem} message {number}", f"message-{number}", attachments)
    return documents
