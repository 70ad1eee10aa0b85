"""A real HTTP server on 127.0.0.1 that answers the MediaWiki Action API the way Wikipedia does
(`list=search`, then `prop=extracts|info` by page id), over a small corpus of real text: the standard
library's own documentation rendered by pydoc. The same server also answers Semantic Scholar's
`GET /graph/v1/paper/search` over those pages, so a benchmark can give a session two providers
(each on its own server, with its own rate).

A per-request delay stands in for a provider's latency; every request is counted with its arrival
time (time.monotonic()), so rate limits can be checked where they matter: at the server.

The response shapes follow the recorded Wikipedia responses in tests/fixtures/wikipedia/ and the
Semantic Scholar recordings in tests/fixtures/semantic_scholar/.
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
    "subprocess",
    "json",
    "pathlib",
    "shutil",
    "tempfile",
    "csv",
    "sqlite3",
    "argparse",
    "logging",
    "functools",
    "itertools",
    "collections",
    "datetime",
    "zipfile",
    "gzip",
    "textwrap",
    "heapq",
    "bisect",
)
WORD = re.compile(r"[a-z][a-z0-9_]{2,}")
SCHOLAR_SEARCH_PATH = "/graph/v1/paper/search"


@dataclass
class Page:
    pageid: int
    title: str
    text: str
    words: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Arrival:
    """One request as the server saw it: when it arrived (time.monotonic()) and what it asked for."""

    at: float
    path: str


PAGE_CHARS = 20000


def build_pages(modules: tuple[str, ...] = MODULES, page_chars: int = PAGE_CHARS) -> list[Page]:
    """One page per module: its pydoc text, cut to `page_chars` characters."""
    pages = []
    for i, name in enumerate(modules, start=1):
        text = pydoc.plain(pydoc.render_doc(name))
        text = re.sub(r"\n{3,}", "\n\n", text)[:page_chars]
        pages.append(
            Page(pageid=1000 + i, title=f"Python {name} module", text=text, words=set(WORD.findall(text.lower())))
        )
    return pages


class WikiReplay:
    def __init__(self, pages: list[Page], delay_s: float) -> None:
        self.pages = {p.pageid: p for p in pages}
        self.delay_s = delay_s
        self.requests: list[str] = []
        self.arrivals: list[Arrival] = []
        self._lock = threading.Lock()

    def record(self, path: str) -> None:
        with self._lock:
            self.requests.append(path)
            self.arrivals.append(Arrival(time.monotonic(), path))

    def arrival_times(self) -> list[float]:
        """Arrival times of every request so far, in order."""
        with self._lock:
            return sorted(a.at for a in self.arrivals)

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
                        {
                            "ns": 0,
                            "title": p.title,
                            "pageid": p.pageid,
                            "size": len(p.text),
                            "wordcount": len(p.text.split()),
                            "snippet": p.text[:200],
                            "timestamp": "2025-07-01T00:00:00Z",
                        }
                        for p in hits
                    ],
                },
            }
        ids = [int(x) for x in params.get("pageids", "").split("|") if x]
        return {
            "batchcomplete": True,
            "query": {
                "pages": [
                    {
                        "pageid": pid,
                        "ns": 0,
                        "title": self.pages[pid].title,
                        "extract": self.pages[pid].text,
                        "fullurl": f"https://en.wikipedia.org/wiki/{self.pages[pid].title.replace(' ', '_')}",
                        "canonicalurl": f"https://en.wikipedia.org/wiki/{self.pages[pid].title.replace(' ', '_')}",
                    }
                    for pid in ids
                    if pid in self.pages
                ]
            },
        }

    def answer_scholar(self, params: dict[str, str]) -> dict[str, Any]:
        """Semantic Scholar's paper search shape; no hits answer `{"total": 0, "offset": 0}`."""
        hits = self.search(params.get("query", ""), int(params.get("limit", "10")))
        if not hits:
            return {"total": 0, "offset": 0}
        return {
            "total": len(hits),
            "offset": 0,
            "data": [
                {
                    "paperId": f"bench{p.pageid}",
                    "title": f"{p.title} (paper)",
                    "url": f"https://www.semanticscholar.org/paper/bench{p.pageid}",
                    "abstract": p.text[:1500],
                    "year": 2024,
                    "publicationDate": "2024-01-01",
                    "authors": [{"authorId": "1", "name": "Python Software Foundation"}],
                    "externalIds": {},
                    "venue": "Python documentation",
                    "openAccessPdf": None,
                    "citationCount": 0,
                }
                for p in hits
            ],
        }


def _handler(replay: WikiReplay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real providers are: a client's pool reuses connections

        def do_GET(self) -> None:
            replay.record(self.path)
            time.sleep(replay.delay_s)
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            answer = replay.answer_scholar(query) if parts.path == SCHOLAR_SEARCH_PATH else replay.answer(query)
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a hundred sessions connect at once in the scale benchmark

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a session cancelled mid-request, a killed server) is expected."""


@contextmanager
def running_wiki(delay_s: float = 0.0, pages: list[Page] | None = None) -> Iterator[tuple[str, WikiReplay]]:
    """Start the server; yields (base URL, replay) and stops it on exit."""
    replay = WikiReplay(pages if pages is not None else build_pages(), delay_s)
    server = _QuietServer(("127.0.0.1", 0), _handler(replay))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", replay
    finally:
        server.shutdown()
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    """`python -m research_tool.bench.wiki_replay --delay S [--page-chars N]`: serve in this process (a
    benchmark runs the replay in its own process, so that the replay's work does not share a GIL with the
    measuring client); prints the base URL as its first line, then serves until killed."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="Wikipedia / Semantic Scholar replay server on 127.0.0.1")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--page-chars", type=int, default=PAGE_CHARS, help="each page's text cut to this length")
    args = parser.parse_args(argv)
    with running_wiki(args.delay, build_pages(page_chars=args.page_chars)) as (url, _):
        sys.stdout.write(url + "\n")
        sys.stdout.flush()
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
