"""Text from images (.png, .jpg, .tiff) and from PDF pages without a text layer: RapidOCR (PP-OCRv4 detection and
recognition models, shipped inside the `rapidocr-onnxruntime` wheel) on onnxruntime, on the CPU, offline. The
`ocr` extra; nothing is downloaded at run time.

- One page at a time, in a worker process (ocr_worker.py, started on the first page, ended when the folder is
  done; at the CPU workers' lower priority), called from the index's own threads (never from the event loop):
  the models and their memory (about 700 MB) stay out of the server's process, which keeps answering.
- Bounded: an image is measured from its header before it is decoded, and one over MAX_PIXELS (a 144-megapixel
  photo) is refused; pages are shrunk to MAX_SIDE pixels on their longer side before recognition.
- Cached: the text of each image is kept by the SHA-256 of its bytes in `<data dir>/ocr_cache.db`, so a file
  indexed again (touched, moved, or in a second folder) is not read again.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import json
import sqlite3
import struct
import subprocess
import sys
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
CACHE_FILE = "ocr_cache.db"

_engine_lock = threading.Lock()
_worker: subprocess.Popen[bytes] | None = None
WORKER_MODULE = "research_tool.providers.local_corpus.ocr_worker"
WORKER_START_S = 60.0  # the models load in 1-2 s; this is for a machine under heavy load


def unavailable_reason() -> str | None:
    """Why OCR cannot run here (its extra is missing), or None."""
    if all(module_installed(module) for module in OCR_MODULES):
        return None
    return f"needs the `{OCR_EXTRA}` extra: {install_hint(OCR_EXTRA)}"


def _need() -> None:
    reason = unavailable_reason()
    if reason:
        raise MissingExtraError(reason, extra=OCR_EXTRA)


def _start_worker() -> subprocess.Popen[bytes]:
    """The OCR worker process (ocr_worker.py), started once and kept: the models load once, the index's process
    never holds them (about 700 MB) nor spends its own CPU on them, and the worker runs at the CPU workers'
    lower priority (RESEARCH_CPU_WORKER_NICENESS), so a server keeps answering while a folder is read."""
    global _worker
    if _worker is not None and _worker.poll() is None:
        return _worker
    worker = subprocess.Popen(
        [sys.executable, "-m", WORKER_MODULE, str(DET_SIDE), str(MAX_SIDE), str(get_settings().cpu_worker_niceness)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert worker.stdout is not None
    ready = _answer(worker)
    if not ready.get("ready"):
        worker.kill()
        raise DocumentParseError(f"the OCR worker did not start: {ready.get('error', 'no answer')}")
    _worker = worker
    atexit.register(stop_worker)
    return worker


def _answer(worker: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert worker.stdout is not None
    line = worker.stdout.readline()
    try:
        answer = json.loads(line) if line else {"error": "the OCR worker exited"}
    except ValueError:
        answer = {"error": "the OCR worker wrote something else than JSON"}
    return answer if isinstance(answer, dict) else {"error": "bad answer"}


def stop_worker() -> None:
    """End the worker (at exit, or to free its memory)."""
    global _worker
    worker, _worker = _worker, None
    if worker is None:
        return
    with contextlib.suppress(OSError, ValueError):
        assert worker.stdin is not None
        worker.stdin.write(HEADER_END)
        worker.stdin.close()
    try:
        worker.wait(timeout=5)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()


HEADER_END = b"\0" * 8


def release_worker() -> None:
    """End the worker once no page is being read (the index calls it when a folder is done: a server does not
    keep the models' memory between folders; a later scan starts a worker again, 1-2 s)."""
    if _worker is None:
        return
    with _engine_lock:
        stop_worker()


def worker_pid() -> int | None:
    return _worker.pid if _worker is not None and _worker.poll() is None else None


def warm_up() -> None:
    """Start the worker and load the models now (a benchmark that wants a page to cost only its own time)."""
    _need()
    with _engine_lock:
        _start_worker()


def _recognise_lines(width: int, height: int, rgb: bytes) -> list[str]:
    """One page through the worker (one at a time in this process)."""
    with _engine_lock:
        worker = _start_worker()
        assert worker.stdin is not None
        try:
            worker.stdin.write(struct.pack(">II", width, height) + rgb)
            worker.stdin.flush()
        except OSError as exc:
            stop_worker()
            raise DocumentParseError(f"the OCR worker stopped: {exc}") from exc
        answer = _answer(worker)
        if "error" in answer:
            if worker.poll() is not None:
                stop_worker()
            raise DocumentParseError(f"OCR failed: {answer['error']}")
    return [str(line) for line in answer.get("lines", [])]


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
    """Text of a decoded PIL image."""
    image = image.convert("RGB")
    if max(image.size) > MAX_SIDE:
        image.thumbnail((MAX_SIDE, MAX_SIDE))
    return lines_to_text(_recognise_lines(image.width, image.height, image.tobytes()))


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
