"""Real office documents, e-books, mail, sheets and scans, written at run time by the libraries real tools write
them with (python-docx, python-pptx, openpyxl, odfpy, ebooklib, the email package, Pillow), one fact in each: the
tests' files (tests/providers/test_document_formats.py...) and `make bench`'s. Also the hostile ones: a zip bomb
docx, entity declarations, truncated and fake archives, an encrypted PDF, a 144-megapixel image header, a sheet
past the row limit."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from email.message import EmailMessage
from pathlib import Path

# (file name, question, words the answer must hold)
FACTS: dict[str, tuple[str, str]] = {
    "report.docx": ("Which river does the Hollin ferry cross?", "Tamsworth"),
    "prices.docx": ("What is the junior annual fee of the Larkspur club?", "£60"),
    "deck.pptx": ("Who leads the Quarry Lane roof project?", "Odile Brennan"),
    "budget.xlsx": ("How much is budgeted for the Elm Street lamps?", "4,250"),
    "minutes.odt": ("When does the allotment committee meet?", "third Thursday"),
    "novel.epub": ("What is the name of the lighthouse keeper's dog?", "Biscuit"),
    "notice.eml": ("When is the Fenwick bridge closed?", "9 March"),
    "letter.rtf": ("Which bakery won the Harrowgate prize?", "Crumb and Co"),
    "stations.csv": ("How many bikes are at the Wexley Green station?", "17"),
}


def write_docx(path: Path) -> None:
    import docx

    document = docx.Document()
    document.core_properties.title = "Hollin Valley ferries"
    document.add_heading("Hollin Valley ferries", level=1)
    document.add_paragraph("The Hollin ferry crosses the river Tamsworth every twenty minutes.")
    document.add_heading("Timetable", level=2)
    document.add_paragraph("Boats run from March to October.", style="List Bullet")
    document.sections[0].footer.paragraphs[0].text = "Hollin Valley Transport Board"
    remark = document.add_paragraph("A reviewer's remark.")
    document.add_comment(remark.runs, text="Secret reviewer comment about dates", author="Reviewer")
    document.save(str(path))


def write_docx_table(path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Larkspur club fees", level=1)
    table = document.add_table(rows=3, cols=3)
    rows = [["Category", "Annual fee", "Monthly fee"], ["Adult", "£180", "£15"], ["Junior", "£60", "£5"]]
    for row, cells in zip(table.rows, rows, strict=True):
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    document.save(str(path))


def write_pptx(path: Path) -> None:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[0])
    first.shapes.title.text = "Estates update"
    first.placeholders[1].text = "Spring term"
    second = deck.slides.add_slide(deck.slide_layouts[1])
    second.shapes.title.text = "Quarry Lane roof"
    second.placeholders[1].text = "Odile Brennan leads the Quarry Lane roof project."
    table = second.shapes.add_table(2, 2, Inches(1), Inches(4), Inches(4), Inches(1)).table
    for (r, c), text in {(0, 0): "Phase", (0, 1): "Start", (1, 0): "Scaffolding", (1, 1): "May"}.items():
        table.cell(r, c).text = text
    second.notes_slide.notes_text_frame.text = "Mention the weather delays."
    deck.save(str(path))


def write_xlsx(path: Path, rows: int = 0) -> None:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "Streets"
    sheet.append(["Item", "Budget", "Owner"])
    sheet.append(["Elm Street lamps", "4,250", "Highways"])
    sheet.append(["Park benches", "900", "Parks"])
    for n in range(rows):
        sheet.append([f"Filler item {n}", n, "Nobody"])
    other = book.create_sheet("Notes")
    other.append(["Note"])
    other.append(["Figures are in pounds."])
    book.save(path)


def write_odt(path: Path) -> None:
    from odf.opendocument import OpenDocumentText
    from odf.text import H, P

    document = OpenDocumentText()
    document.text.addElement(H(outlinelevel=1, text="Allotment committee"))
    document.text.addElement(P(text="The allotment committee meets on the third Thursday of each month."))
    document.save(str(path))


def write_ods(path: Path) -> None:
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    document = OpenDocumentSpreadsheet()
    table = Table(name="Rota")
    for cells in (["Day", "Volunteer"], ["Monday", "Priya Natarajan"]):
        row = TableRow()
        for text in cells:
            cell = TableCell(valuetype="string")
            cell.addElement(P(text=text))
            row.addElement(cell)
        table.addElement(row)
    document.spreadsheet.addElement(table)
    document.save(str(path))


def write_epub(path: Path) -> None:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("lighthouse-1")
    book.set_title("The Lighthouse at Garrow Point")
    book.set_language("en")
    one = epub.EpubHtml(title="Arrival", file_name="one.xhtml", lang="en")
    one.content = "<h1>Arrival</h1><p>The keeper came to Garrow Point in the autumn.</p>"
    two = epub.EpubHtml(title="The dog", file_name="two.xhtml", lang="en")
    two.content = "<h1>The dog</h1><p>The lighthouse keeper's dog is called Biscuit.</p>"
    book.add_item(one)
    book.add_item(two)
    book.toc = [one, two]
    book.spine = [one, two]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    epub.write_epub(str(path), book)


def email_message(attachment: tuple[str, bytes] | None = None) -> EmailMessage:
    message = EmailMessage()
    message["Subject"] = "Fenwick bridge closure"
    message["From"] = "Roads Office <roads@example.org>"
    message["To"] = "residents@example.org"
    message["Date"] = "Mon, 02 Feb 2026 09:30:00 +0000"
    message.set_content("Hello all,\n\nThe Fenwick bridge is closed on 9 March for repairs.\n\nRoads Office")
    message.add_alternative("<p>The Fenwick bridge is closed on <b>9 March</b> for repairs.</p>", subtype="html")
    if attachment is not None:
        name, data = attachment
        message.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return message


def write_eml(path: Path, attachment: tuple[str, bytes] | None = None) -> None:
    path.write_bytes(bytes(email_message(attachment)))


def write_mbox(path: Path) -> None:
    import mailbox

    box = mailbox.mbox(str(path))
    box.add(email_message())
    other = EmailMessage()
    other["Subject"] = "Choir practice"
    other["From"] = "choir@example.org"
    other["Date"] = "Tue, 03 Feb 2026 18:00:00 +0000"
    other.set_content("Choir practice moves to the Corn Exchange on Fridays.")
    box.add(other)
    box.flush()
    box.close()


def write_rtf(path: Path) -> None:
    path.write_text(
        r"{\rtf1\ansi\deff0{\fonttbl{\f0 Times New Roman;}}"
        r"{\b Harrowgate baking prize}\par "
        r"The Harrowgate prize went to the bakery Crumb and Co this year.\par }",
        encoding="ascii",
    )


def write_csv(path: Path, rows: int = 0, delimiter: str = ",") -> None:
    lines = [delimiter.join(["Station", "Bikes", "Docks"]), delimiter.join(["Wexley Green", "17", "24"])]
    lines += [delimiter.join([f"Filler {n}", str(n), "1"]) for n in range(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def notice_image(lines: list[str], size: tuple[int, int] = (1000, 500)):  # type: ignore[no-untyped-def]
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=36)
    for i, line in enumerate(lines):
        draw.text((40, 40 + i * 70), line, fill="black", font=font)
    return image


def write_png(path: Path) -> None:
    notice_image(["Notice", "The Ashby pool reopens on 14 June."]).save(path)


def write_scanned_pdf(path: Path) -> None:
    """A PDF of one page that is only an image (what a scanner writes): no text layer."""
    notice_image(["Scanned letter", "The Corby library card costs 4 pounds."], size=(1000, 700)).save(path, "PDF")


def write_all(folder: Path, *, ocr: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_docx(folder / "report.docx")
    write_docx_table(folder / "prices.docx")
    write_pptx(folder / "deck.pptx")
    write_xlsx(folder / "budget.xlsx")
    write_odt(folder / "minutes.odt")
    write_epub(folder / "novel.epub")
    write_eml(folder / "notice.eml")
    write_rtf(folder / "letter.rtf")
    write_csv(folder / "stations.csv")
    if ocr:
        write_png(folder / "notice.png")
        write_scanned_pdf(folder / "scan.pdf")


# --- hostile files ------------------------------------------------------------------------------


def zip_bomb_docx(path: Path, unpacked: int = 1_500_000_000) -> None:
    """A docx whose document.xml unpacks to `unpacked` bytes of XML (1.5 GB) in a file of about 1.5 MB: written
    as a raw deflate stream of zeros-like spaces, chunk by chunk, so building it costs no memory."""
    import docx

    base = io.BytesIO()
    docx.Document().save(base)
    with zipfile.ZipFile(base) as original:
        parts = {name: original.read(name) for name in original.namelist()}
    head = b'<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
    tail = b"</w:body></w:document>"
    filler = unpacked - len(head) - len(tail)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    crc = zlib.crc32(head)
    body = bytearray(compressor.compress(head))
    chunk = b" " * (1 << 20)
    for _ in range(filler // len(chunk)):
        body += compressor.compress(chunk)
        crc = zlib.crc32(chunk, crc)
    rest = b" " * (filler % len(chunk))
    body += compressor.compress(rest) + compressor.compress(tail) + compressor.flush()
    crc = zlib.crc32(tail, zlib.crc32(rest, crc))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in parts.items():
            if name != "word/document.xml":
                out.writestr(name, data)
    _append_raw_member(path, "word/document.xml", bytes(body), crc, unpacked)


def _append_raw_member(path: Path, name: str, compressed: bytes, crc: int, size: int) -> None:
    """Add an already deflated member to a zip (zipfile would inflate nothing but would compress again)."""
    data = path.read_bytes()
    end = data.rindex(b"PK\x05\x06")
    entries, cd_size, cd_offset = struct.unpack("<HII", data[end + 10 : end + 20])
    central = data[cd_offset : cd_offset + cd_size]
    encoded = name.encode()
    offset = cd_offset
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(compressed), size, len(encoded), 0)
    record = struct.pack(
        "<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(compressed), size, len(encoded), 0, 0, 0, 0, 0,
        offset,
    )  # fmt: skip
    new_cd_offset = offset + len(local) + len(encoded) + len(compressed)
    new_central = central + record + encoded
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, entries + 1, entries + 1, len(new_central), new_cd_offset, 0)
    path.write_bytes(data[:cd_offset] + local + encoded + compressed + new_central + eocd)


def entity_docx(path: Path, kind: str = "laughs") -> None:
    """A docx whose document.xml declares entities: "billion laughs" or an external entity (XXE) naming
    /etc/passwd."""
    import docx

    base = io.BytesIO()
    docx.Document().save(base)
    if kind == "laughs":
        dtd = (
            '<!DOCTYPE w:document [<!ENTITY a "lol">'
            + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(9))
            + "]>"
        )
        use = "&j;"
    else:
        dtd = '<!DOCTYPE w:document [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
        use = "&xxe;"
    xml = (
        f'<?xml version="1.0"?>{dtd}<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        f"<w:body><w:p><w:r><w:t>{use}</w:t></w:r></w:p></w:body></w:document>"
    )
    with zipfile.ZipFile(base) as original, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for name in original.namelist():
            out.writestr(name, xml if name == "word/document.xml" else original.read(name))


def encrypted_pdf(path: Path) -> None:
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(200, 200)
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="RC4-128")
    with path.open("wb") as out:
        writer.write(out)


def huge_png_header(path: Path, width: int = 12_000, height: int = 12_000) -> None:
    """A PNG whose header says 144 megapixels (its data is one tiny compressed stream): decoding it would need
    432 MB; the reader must refuse it from the header."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    data = zlib.compress(b"\x00" * 1024)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b""))
