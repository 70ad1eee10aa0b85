"""The worker process that reads pages through OCR for the local index (ocr.py starts one and keeps it).

    python -m research_tool.providers.local_corpus.ocr_worker [DET_SIDE MAX_SIDE NICENESS]

Reads pages from stdin, one at a time: an 8-byte header (width, height, unsigned big-endian) and then
width x height x 3 bytes of RGB pixels; a header of zeros ends it. Answers each with one JSON line on stdout:
{"lines": [...]} (the recognised lines in reading order) or {"error": "..."}. The models load once, at start.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import struct
import sys
from typing import Any

HEADER = struct.Struct(">II")


def _engine(det_side: int, max_side: int) -> Any:
    from rapidocr_onnxruntime import RapidOCR

    logging.getLogger("RapidOCR").setLevel(logging.ERROR)
    # Detection on the page shrunk to det_side on its longer side (RapidOCR's default enlarges it to 736 on
    # its shorter one), and one onnxruntime thread: an A4 page of 12 lines at 150 dpi took 7.1 CPU-s with the
    # defaults, 4.4 with det_side 960 and two threads, 2.8 with one (docs/documents.md); the other core stays free.
    return RapidOCR(
        max_side_len=max_side,
        det_limit_type="max",
        det_limit_side_len=det_side,
        intra_op_num_threads=1,
        inter_op_num_threads=1,
        print_verbose=False,
    )


def _read_exactly(stream: Any, size: int) -> bytes:
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def main(argv: list[str]) -> int:
    import numpy as np

    det_side, max_side, niceness = (int(a) for a in argv[:3]) if len(argv) >= 3 else (960, 2000, 0)
    if niceness and hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(niceness)  # below the server, as the CPU workers run (RESEARCH_CPU_WORKER_NICENESS)
    engine = _engine(det_side, max_side)
    source, sink = sys.stdin.buffer, sys.stdout
    sink.write(json.dumps({"ready": True}) + "\n")
    sink.flush()
    while True:
        try:
            width, height = HEADER.unpack(_read_exactly(source, HEADER.size))
            if not width or not height:
                return 0
            pixels = _read_exactly(source, width * height * 3)
        except EOFError:
            return 0
        try:
            page = np.frombuffer(pixels, dtype=np.uint8).reshape(height, width, 3)[:, :, ::-1]  # BGR for OpenCV
            result, _elapsed = engine(np.ascontiguousarray(page), use_cls=False)
            answer: dict[str, Any] = {"lines": [str(item[1]) for item in result or []]}
        except Exception as exc:  # one bad page is reported, the worker goes on
            answer = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        sink.write(json.dumps(answer) + "\n")
        sink.flush()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
