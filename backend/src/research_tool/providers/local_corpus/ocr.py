"""Text from images (.png, .jpg, .tiff) and from PDF pages without a text layer: RapidOCR (PP-OCRv4 detection and
recognition models, shipped inside the `rapidocr-onnxruntime` wheel) on onnxruntime, on the CPU, offline. The
`ocr` extra; nothing is downloaded at run time.

- One page at a time: one engine per process, behind a lock, run in the index's own worker threads (never on
  the event loop; onnxruntime releases the GIL while it computes), so a server keeps answering while it reads.
- Bounded: an image is measured from its header before it is decoded, and one over MAX_PIXELS (a 144-megapixel
  photo) is refused; pages are shrunk to MAX_SIDE pixels on their longer side before recognition.
- Cached: the text of each image is kept by the SHA-256 of its bytes in `<data dir>/ocr_cache.db`, so a file
  indexed again (touched, moved, or in a second folder) is not read again.
"""

from __future__ import annotations

import hashlib
import io
import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

from research_tool.core.extras import OCR_MODULES, install_hint, module_installed
from research_tool.core.logging import get_logger
from research_tool.core.settings import get_settings
from research_tool.providers.local_corpus.documents import (
    CorpusDocument,
    DocumentLimitError,
    DocumentParseError,
    MissingExtraError,
)

log = get_logger(__name__)

OCR_EXTRA = "ocr"
MAX_PIXELS = 40_000_000
MAX_SIDE = 2000
DET_SIDE = 960
MAX_PDF_OCR_PAGES = 200
CACHE_FILE = "ocr_cache.db"

_engine: Any = None
_engine_lock = threading.Lock()


def unavailable_reason() -> str | None:
    """Why OCR cannot run here (its extra is missing), or None."""
    if all(module_installed(module) for module in OCR_MODULES):
        return None
    return f"needs the `{OCR_EXTRA}` extra: {install_hint(OCR_EXTRA)}"


def _need() -> None:
    reason = unavailable_reason()
    if reason:
        raise MissingExtraError(reason, extra=OCR_EXTRA)


def _get_engine() -> Any:
    global _engine
    if _engine is None:
        import logging

        from rapidocr_onnxruntime import RapidOCR

        logging.getLogger("RapidOCR").setLevel(logging.ERROR)
        # detection on the page shrunk to DET_SIDE on its longer side (RapidOCR's default enlarges it to 736 on
        # its shorter one): an A4 page at 150 dpi took 4.7 CPU-s, now 3.3 (docs/documents.md); lines are still
        # recognised from the page at up to MAX_SIDE
        _engine = RapidOCR(
            max_side_len=MAX_SIDE, det_limit_type="max", det_limit_side_len=DET_SIDE, print_verbose=False
        )
    return _engine


def warm_up() -> None:
    """Load the models now (a server or a benchmark that wants the first page to cost only its own time)."""
    _need()
    with _engine_lock:
        _get_engine()


# --- the cache ----------------------------------------------------------------------------------


def _cache() -> sqlite3.Connection:
    conn = sqlite3.connect(get_settings().db_path(CACHE_FILE), timeout=30.0, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS ocr_text (sha256 TEXT PRIMARY KEY, text TEXT NOT NULL)")
    return conn


def _cached(digest: str) -> str | None:
    try:
        with closing(_cache()) as conn:
            row = conn.execute("SELECT text FROM ocr_text WHERE sha256 = ?", (digest,)).fetchone()
    except sqlite3.Error as exc:
        log.warning("ocr_cache_unreadable", error=str(exc))
        return None
    return str(row[0]) if row else None


def _store(digest: str, text: str) -> None:
    try:
        with closing(_cache()) as conn:
            conn.execute("INSERT OR REPLACE INTO ocr_text (sha256, text) VALUES (?, ?)", (digest, text))
    except sqlite3.Error as exc:
        log.warning("ocr_cache_unwritable", error=str(exc))


# --- recognition --------------------------------------------------------------------------------


def lines_to_text(lines: list[str]) -> str:
    """Recognised lines -> paragraphs: a line that ends a sentence ends its paragraph, and so does a short line
    with no full stop followed by a capital (a heading or a label: never glued to the sentence after it)."""
    blocks: list[str] = []
    current: list[str] = []
    for i, raw in enumerate(lines):
        line = " ".join(raw.split())
        if not line:
            continue
        current.append(line)
        following = lines[i + 1].strip() if i + 1 < len(lines) else ""
        ends = line.endswith((".", "!", "?", ":"))
        label = not ends and len(line) <= 60 and following[:1].isupper()
        if ends or label or not following:
            text = " ".join(current)
            blocks.append(f"## {text}" if label and len(current) == 1 else text)
            current = []
    if current:
        blocks.append(" ".join(current))
    return "\n\n".join(blocks)


def _recognise(image: Any) -> str:
    """Text of a decoded PIL image (one at a time in this process)."""
    import numpy as np

    image = image.convert("RGB")
    if max(image.size) > MAX_SIDE:
        image.thumbnail((MAX_SIDE, MAX_SIDE))
    array = np.asarray(image)[:, :, ::-1]  # RapidOCR takes OpenCV's BGR order
    with _engine_lock:
        result, _elapsed = _get_engine()(array, use_cls=False)
    if not result:
        return ""
    return lines_to_text([str(item[1]) for item in result])


def _checked_size(width: int, height: int, name: str) -> None:
    if width * height > MAX_PIXELS:
        raise DocumentLimitError(
            f"{name} is {width}x{height} pixels ({width * height / 1e6:.0f} MP; OCR limit {MAX_PIXELS / 1e6:.0f} MP)"
        )


def image_text(data: bytes, name: str) -> str:
    """OCR text of an image file's bytes (cached by their hash)."""
    _need()
    from PIL import Image, UnidentifiedImageError

    Image.MAX_IMAGE_PIXELS = 10 * MAX_PIXELS  # Pillow refuses past twice this; _checked_size first
    try:
        with Image.open(io.BytesIO(data)) as image:
            _checked_size(*image.size, name)  # from the header: nothing decoded yet
            digest = hashlib.sha256(data).hexdigest()
            cached = _cached(digest)
            if cached is not None:
                return cached
            image.seek(0)
            text = _recognise(image)
    except DocumentParseError:
        raise
    except Image.DecompressionBombError as exc:
        raise DocumentLimitError(f"{name}: {exc}") from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise DocumentParseError(f"cannot read image {name}: {exc}") from exc
    _store(digest, text)
    return text


def read_image(path: Path, data: bytes) -> list[CorpusDocument]:
    text = image_text(data, path.name)
    if not text.strip():
        return []
    return [CorpusDocument(key="", title=f"{path.name} (OCR)", text=text)]


def pdf_page_text(page: Any, name: str) -> str:
    """OCR text of a PDF page without a text layer: each image drawn on it, largest first (their sizes read from
    the PDF's dictionaries before any is decoded), cached by the hash of its bytes."""
    _need()
    from PIL import Image

    try:
        resources = page.get("/Resources")
        xobjects = resources.get_object().get("/XObject") if resources is not None else None
        images = []
        if xobjects is not None:
            for ref in xobjects.get_object().values():
                xobject = ref.get_object()
                if xobject.get("/Subtype") == "/Image":
                    width, height = int(xobject.get("/Width", 0)), int(xobject.get("/Height", 0))
                    _checked_size(width, height, name)
                    images.append((width * height, xobject))
    except DocumentParseError:
        raise
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise DocumentParseError(f"cannot read the images of {name}: {exc}") from exc
    texts = []
    Image.MAX_IMAGE_PIXELS = 10 * MAX_PIXELS  # Pillow refuses past twice this; _checked_size first
    for _area, xobject in sorted(images, key=lambda item: -item[0]):
        try:
            raw = xobject.get_data()
        except Exception as exc:  # pypdf's filters raise many kinds on a broken stream
            log.warning("ocr_pdf_image_unreadable", file=name, error=str(exc))
            continue
        digest = hashlib.sha256(raw).hexdigest()
        cached = _cached(digest)
        if cached is None:
            try:
                image = xobject.decode_as_image()
            except Exception as exc:
                log.warning("ocr_pdf_image_unreadable", file=name, error=str(exc))
                continue
            if image is None:
                continue
            cached = _recognise(image)
            _store(digest, cached)
        if cached.strip():
            texts.append(cached)
    return "\n\n".join(texts)
