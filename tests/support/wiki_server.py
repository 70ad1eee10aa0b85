"""A real HTTP server on 127.0.0.1 that answers the MediaWiki Action API the way Wikipedia does
(`list=search`, then `prop=extracts|info` by page id), over a small corpus of real text: the standard
library's own documentation rendered by pydoc. A per-request delay makes sessions slow enough to be
caught mid-collect; every request is counted.

The response shapes follow the recorded Wikipedia responses in tests/fixtures/wikipedia/.
"""

from __future__ import annotations

import json
import pydoc
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

MODULES = (
    "subprocess", "json", "pathlib", "shutil", "tempfile", "csv", "sqlite3", "argparse", "logging",
    "functools", "itertools", "collections", "datetime", "zipfile", "gzip", "textwrap", "heapq", "bisect",
)
WORD = re.compile(r"[a-z][a-z0-9_]{2,}")


@dataclass
class Page:
    pageid: int
    title: str
    text: str
    words: set[str] = field(default_factory=set)


def build_pages(modules: tuple[str, ...] = MODULES) -> list[Page]:
    pages = []
    for i, name in enumerate(modules, start=1):
        text = pydoc.render_doc(name, renderer=pydoc.plaintext)
        text = re.sub(r"\n{3,}", "\n\n", text)[:20000]
        pages.append(Page(pageid=1000 + i, title=f"Python {name} module", text=text, words=set(WORD.findall(text.lower()))))
    return pages


class WikiReplay:
    def __init__(self, pages: list[Page], delay_s: float) -> None:
        self.pages = {p.pageid: p for p in pages}
        self.delay_s = delay_s
        self.requests: list[str] = []
        self._lock = threading.Lock()

    def search(self, query: str, limit: int) -> list[Page]:
        terms = set(WORD.findall(query.lower()))
        scored = [(len(terms & p.words), p.pageid) for p in self.pages.values()]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        return [self.pages[pid] for _, pid in ranked[:limit]]

    def answer(self, params: dict[str, str]) -> dict[str, Any]:
        if params.get("list") == "search":
            hits = self.search(params.get("srsearch", ""), int(params.get("srlimit", "10")))
            return {
                "batchcomplete": True,
                "query": {
                    "searchinfo": {"totalhits": len(hits)},
                    "search": [
                        {"ns": 0, "title": p.title, "pageid": p.pageid, "size": len(p.text),
                         "wordcount": len(p.text.split()), "snippet": p.text[:200],
                         "timestamp": "2025-07-01T00:00:00Z"}
                        for p in hits
                    ],
                },
            }
        ids = [int(x) for x in params.get("pageids", "").split("|") if x]
        return {
            "batchcomplete": True,
            "query": {
                "pages": [
                    {"pageid": pid, "ns": 0, "title": self.pages[pid].title, "extract": self.pages[pid].text,
                     "fullurl": f"https://en.wikipedia.org/wiki/{self.pages[pid].title.replace(' ', '_')}",
                     "canonicalurl": f"https://en.wikipedia.org/wiki/{self.pages[pid].title.replace(' ', '_')}"}
                    for pid in ids if pid in self.pages
                ]
            },
        }


def _handler(replay: WikiReplay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            with replay._lock:
                replay.requests.append(self.path)
            time.sleep(replay.delay_s)
            query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
            body = json.dumps(replay.answer(query)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler


@contextmanager
def running_wiki(delay_s: float = 0.0, pages: list[Page] | None = None) -> Iterator[tuple[str, WikiReplay]]:
    """Start the server; yields (base URL, replay) and stops it on exit."""
    replay = WikiReplay(pages if pages is not None else build_pages(), delay_s)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(replay))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", replay
    finally:
        server.shutdown()
        server.server_close()
