"""The `local` provider: search folders of the user's own documents (DESIGN §4).

Its folders are indexed into the corpus index (SQLite FTS5) on first use, incrementally, and
searches are restricted to them. A result carries the whole document as `full_content`, so the
collect node needs no fetch; `location` names the file (relative to its folder) and, for a jsonl
line, the document id.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import httpx

from research_tool.core.errors import BadInputError, ProviderUnavailableError
from research_tool.core.logging import get_logger
from research_tool.core.settings import Settings
from research_tool.models.entities import SourceResult
from research_tool.providers.base import Privacy, SearchProvider, SourceKind
from research_tool.providers.local_corpus.hybrid import open_corpus_index
from research_tool.providers.local_corpus.index import CorpusHit, CorpusIndex, IndexStats
from research_tool.providers.local_corpus.indexed_folders import local_folders

log = get_logger(__name__)

INDEX_FILE = "local_index.db"
NO_FOLDER_REASON = "no corpus folder: index one with `research-tool index DIR` (or set RESEARCH_CORPUS_DIRS)"
# A document longer than this is cut (at a paragraph or sentence end) in `full_content`; the whole
# text stays searchable. It keeps checkpoints small when a folder holds book-length PDFs.
MAX_CONTENT_CHARS = 100_000


def truncate_text(text: str, limit: int = MAX_CONTENT_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = max(head.rfind("\n\n"), head.rfind(". "))
    return head[: cut + 1].rstrip() if cut > limit // 2 else head.rstrip()


# When each (index file, folder) pair was last brought up to date in this process. The collect node
# builds a provider per cycle; this keeps later cycles from walking the folders again.
_LAST_INDEXED: dict[tuple[str, str], float] = {}


def _exists(path: Path) -> bool:
    """`path.exists()`, with a path the OS refuses (too long, NUL byte) counted as missing."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


class LocalProvider(SearchProvider):
    name: ClassVar[str] = "local"
    default_rps: ClassVar[float] = 1000.0
    privacy: ClassVar[Privacy] = "local"
    kind: ClassVar[SourceKind] = "local"

    # A long-lived provider (the server) re-checks its folders for changed files this often.
    reindex_after_s: ClassVar[float] = 300.0

    def __init__(
        self,
        settings: Settings,
        client: httpx.AsyncClient,
        corpus_dirs: Sequence[Path | str] | None = None,
        *,
        index: CorpusIndex | None = None,
    ) -> None:
        super().__init__(settings, client)
        dirs = local_folders(settings) if corpus_dirs is None else corpus_dirs
        self.corpus_dirs: list[Path] = [Path(d).expanduser() for d in dirs]
        self._index = index
        self._index_lock: asyncio.Lock | None = None

    @property
    def index(self) -> CorpusIndex:
        if self._index is None:
            self._index = open_corpus_index(
                self.settings.db_path(INDEX_FILE),
                semantic=self.settings.semantic_search,
                max_file_bytes=self.settings.corpus_max_file_bytes,
            )
        return self._index

    def unavailable_reason(self) -> str | None:
        if not self.corpus_dirs:
            return NO_FOLDER_REASON
        missing = [d for d in self.corpus_dirs if not _exists(d)]
        if missing:
            return f"corpus folder not found: {missing[0]}"
        return None

    def check_folders(self) -> list[Path]:
        """The folders, resolved; raises BadInputError with one clear line when one is missing."""
        for folder in self.corpus_dirs:
            if not _exists(folder):
                raise BadInputError(f"corpus folder not found: {folder}")
        return [folder.resolve() for folder in self.corpus_dirs]

    async def ensure_indexed(self, *, force: bool = False) -> IndexStats:
        """Index (incrementally) every folder unless done recently; returns what changed."""
        if not self.corpus_dirs:
            raise ProviderUnavailableError(self.name, NO_FOLDER_REASON)
        folders = self.check_folders()
        if self._index_lock is None:
            self._index_lock = asyncio.Lock()
        async with self._index_lock:
            db = str(self.index.db_path.resolve())
            now = time.monotonic()
            stale = [
                folder
                for folder in folders
                if force or now - _LAST_INDEXED.get((db, str(folder)), -float("inf")) >= self.reindex_after_s
            ]
            total = IndexStats()
            for folder in stale:
                total = total + await self.index.index_folder(folder)
                _LAST_INDEXED[(db, str(folder))] = time.monotonic()
            if not stale:
                return total
            log.info(
                "local_corpus_ready",
                folders=len(folders),
                documents=total.docs_total,
                added=total.docs_added,
                updated=total.docs_updated,
                removed=total.docs_removed,
                duration_s=round(total.duration_s, 3),
            )
            return total

    async def search(
        self, query: str, max_results: int = 10, filters: dict[str, Any] | None = None
    ) -> list[SourceResult]:
        await self.ensure_indexed()
        hits = await self.index.search(query, roots=self.check_folders(), limit=max_results)
        return [self._to_result(hit, query) for hit in hits]

    def _to_result(self, hit: CorpusHit, query: str) -> SourceResult:
        return SourceResult(
            url=hit.url,
            title=hit.title or hit.location,
            snippet=hit.snippet,
            source_name=self.name,
            full_content=truncate_text(hit.text),
            location=hit.location,
            rank=hit.rank,
            query=query,
        )


async def indexed_texts(settings: Settings, urls: Sequence[str]) -> dict[str, str]:
    """Each local document's text as a session reads it (`full_content`: cut like the provider's results), from
    the data dir's index; a url the index does not hold is left out."""
    if not urls:
        return {}
    index_path = settings.db_path(INDEX_FILE)
    if not index_path.exists():
        return {}
    texts = await CorpusIndex(index_path).texts(urls)
    return {url: truncate_text(text) for url, text in texts.items()}
