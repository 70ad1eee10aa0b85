"""Benchmark: indexing the formats of issue 42 (office documents, sheets, e-books, mail, RTF, scans by OCR).

A folder of COPIES files of each kind, written at run time by the libraries real tools use
(bench/document_files.py, one fact each, every copy with its own words so none is a duplicate), is indexed
once; then indexed again unchanged (target: under a second); then OCR reads OCR_PAGES scanned pages (one image
and one text-less PDF page each; target: at most 3 s a page). Needs the `documents` extra (and `ocr` for the OCR
figure); skipped with the reason without them.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import tempfile
import time
from pathlib import Path

from research_tool.bench.results import BenchResult
from research_tool.core.settings import reset_settings_cache

COPIES = 20
OCR_PAGES = 3
TARGET_REINDEX_S = 1.0
TARGET_OCR_PAGE_S = 3.0


def _write_folder(folder: Path, copies: int) -> int:
    from research_tool.bench import document_files as files

    writers = {
        "docx": files.write_docx,
        "pptx": files.write_pptx,
        "xlsx": files.write_xlsx,
        "odt": files.write_odt,
        "epub": files.write_epub,
        "eml": files.write_eml,
        "rtf": files.write_rtf,
        "csv": files.write_csv,
        "ods": files.write_ods,
    }
    folder.mkdir(parents=True)
    for n in range(copies):
        for suffix, write in writers.items():
            path = folder / f"copy{n:03d}" / f"file.{suffix}"
            path.parent.mkdir(exist_ok=True)
            write(path)
    return copies * len(writers)


def _write_scans(folder: Path, pages: int) -> None:
    from research_tool.bench import document_files as files

    folder.mkdir(parents=True)
    for n in range(pages):
        lines = [f"Notice {n}"] + [
            f"Line {i}: the Ashby pool reopens on {n + 1} June at {i} o'clock." for i in range(11)
        ]
        image = files.notice_image(lines, size=(1240, 1754))  # an A4 page at 150 dpi
        image.save(folder / f"notice{n}.png")


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of a process so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_documents(copies: int = COPIES, ocr_pages: int = OCR_PAGES) -> BenchResult:
    from research_tool.providers.local_corpus.index import CorpusIndex

    result = BenchResult(
        name="documents",
        title="Local index: office documents, sheets, e-books, mail and scans (issue 42)",
        parameters={"copies of each of 9 kinds": copies, "ocr pages": ocr_pages},
    )
    missing = [m for m in ("docx", "pptx", "openpyxl", "odf", "ebooklib") if importlib.util.find_spec(m) is None]
    if missing:
        result.skipped = f"needs the `documents` extra and the dev extra's writers (missing: {', '.join(missing)})"
        return result
    with tempfile.TemporaryDirectory(prefix="bench-documents-") as tmp:
        root = Path(tmp)
        files = await asyncio.to_thread(_write_folder, root / "docs", copies)
        index = CorpusIndex(root / "index.db")
        started = time.perf_counter()
        stats = await index.index_folder(root / "docs")
        first = time.perf_counter() - started
        result.add(
            "files indexed", stats.files_added, "files", note=", ".join(f"{n} {k}" for k, n in stats.kinds.items())
        )
        result.add("indexing speed, 9 kinds mixed", round(files / first, 1), "files/s", note=f"{first:.2f} s")
        started = time.perf_counter()
        await index.index_folder(root / "docs")
        again = time.perf_counter() - started
        result.add("index again, unchanged", round(again, 3), "s", target=TARGET_REINDEX_S, comparison="<=")
        if importlib.util.find_spec("rapidocr_onnxruntime") is None:
            result.add("OCR", None, note="skipped: needs the `ocr` extra")
            return result
        await asyncio.to_thread(_write_scans, root / "scans", ocr_pages)
        previous = os.environ.get("RESEARCH_DATA_DIR")
        os.environ["RESEARCH_DATA_DIR"] = str(root / "data")  # the OCR cache of this run only
        reset_settings_cache()
        try:
            from research_tool.providers.local_corpus import ocr

            started = time.perf_counter()
            await asyncio.to_thread(ocr.warm_up)
            result.add("OCR engine load", round(time.perf_counter() - started, 2), "s")
            started = time.perf_counter()
            cpu = _cpu_seconds(ocr.worker_pid())
            await index.index_folder(root / "scans")
            per_page = (time.perf_counter() - started) / ocr_pages
            used = _cpu_seconds(ocr.worker_pid()) - cpu
            result.add("OCR worker CPU per page", round(used / ocr_pages, 2), "CPU-s", note="user + system, /proc")
            result.add(
                "OCR per page (A4 at 150 dpi, 12 lines)",
                round(per_page, 2),
                "s",
                target=TARGET_OCR_PAGE_S,
                comparison="<=",
            )
        finally:
            if previous is None:
                os.environ.pop("RESEARCH_DATA_DIR", None)
            else:
                os.environ["RESEARCH_DATA_DIR"] = previous
            reset_settings_cache()
    return result
