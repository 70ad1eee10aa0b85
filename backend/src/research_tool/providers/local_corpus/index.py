"""A full-text index of local documents in SQLite FTS5 (porter stemming, title boost, incremental).

Layout of the index file:
- `collections`: one row per indexed folder (its root); each has its own FTS5 table
  `docs_fts_<id>` (title, body), so BM25's statistics (document count, lengths, term frequencies
  across documents) are those of that folder alone: a search over folder A ranks the same whether
  or not an unrelated folder B is indexed in the same file.
- `files`: one row per indexed file (absolute path, size, mtime, content hash, collection). A file
  whose size and mtime are unchanged is not opened again; one whose bytes hash the same is not
  parsed again. Indexing a subfolder of an indexed folder reuses that folder's collection.
- `docs`: one row per document (file, id inside the file, url, content hash, collection); its rowid
  is the rowid of the document's row in its collection's FTS table, so an edited jsonl line
  rewrites only that document.

Ranking is FTS5's bm25() with column weights (title counts `title_weight` times a body hit). FTS5
fixes k1=1.2 and b=0.75; the weights and the query (stopwords, OR of terms) are what we tune. A
search over several collections merges their hits by score.
Every SQLite call is blocking and runs in the index's own thread pool (index_pool.py: bounded, fair between
folders, and a call stops when its caller is cancelled); each call opens its own connection, and the file is in
WAL mode, so concurrent readers never wait for each other or for the writer.

Only regular files are read (a FIFO, socket or device is skipped: a FIFO would block the walk forever), and
none larger than RESEARCH_CORPUS_MAX_FILE_MB (skipped with a warning), so indexing holds at most one such file
in memory at a time.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field, fields
from pathlib import Path
from stat import S_ISREG
from urllib.parse import quote

from research_tool.core.errors import BadInputError
from research_tool.core.logging import get_logger
from research_tool.core.settings import get_settings
from research_tool.core.stopwords import STOPWORDS
from research_tool.providers.local_corpus.documents import (
    CorpusDocument,
    DocumentParseError,
    FileTooLargeError,
    MissingExtraError,
    NotRegularFileError,
    OutsideRootError,
    read_bytes_inside,
    resolves_inside,
)
from research_tool.providers.local_corpus.formats import is_supported, kind_of, read_file, release_workers
from research_tool.providers.local_corpus.index_pool import Cancel, run_in_index_pool

log = get_logger(__name__)

SCHEMA_VERSION = 3
DEFAULT_TITLE_WEIGHT = 3.0  # SciFact train nDCG@10: 1.0 0.700, 2.0 0.704, 3.0 0.707, 4.0 0.707, 6.0 0.705
DEFAULT_BODY_WEIGHT = 1.0
DEFAULT_NAMES_WEIGHT = 3.0  # the parts of the title's compound names count as title words
MAX_QUERY_TERMS = 64
SNIPPET_TOKENS = 40
# FTS5's snippet() takes time quadratic in the query's hits in a document (8 s for 20,000 words that all match,
# minutes for a few hundred KB), and no interrupt reaches it while it runs: it is asked only of documents up to
# this long; a longer one gets `long_snippet`, linear, over its first _SNIPPET_SCAN_CHARS characters.
FTS_SNIPPET_MAX_CHARS = 20_000
_SNIPPET_SCAN_CHARS = 1_000_000
_COMMIT_EVERY_FILES = 200
_COMMIT_EVERY_DOCS = 5_000
_OPTIMIZE_AFTER_DOCS = 1_000

_TOKEN = re.compile(r"[^\W_]+")
_COMPOUND = re.compile(r"[a-z][A-Z]|[A-Za-z]\d|\d[A-Za-z]")  # a word of parts: "DictReader", "sha256"
_COMPOUND_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_HYPHENATED_NAME = re.compile(r"(?<![\w-])([^\W\d_]+)-(\d+)(?![\w-])")  # "sha-256", "utf-8"; not "a-1-b"


def name_parts(title: str) -> str:
    """The parts of the compound names in a title, which the tokenizer keeps whole: "csv.DictReader" ->
    "Dict Reader", "hashlib.sha256" -> "sha 256". Indexed in their own column, so "read into dictionaries"
    meets `DictReader` and "SHA-256" meets `sha256`; a title of plain words has none."""
    parts: list[str] = []
    for word in _TOKEN.findall(title):
        if _COMPOUND.search(word):
            parts += _COMPOUND_PART.findall(word)
    return " ".join(parts)


def joined_names(text: str) -> list[str]:
    """The names a query spells with a hyphen between letters and digits, joined as an identifier writes them:
    "SHA-256" -> "sha256", "UTF-8" -> "utf8". The tokenizer cuts "SHA-256" into "sha" and "256", which also
    match `sha3_256` ("sha3", "256") and `sha384`'s parts as well as `sha256`; the joined word is `sha256`'s own."""
    return [f"{letters}{digits}" for letters, digits in _HYPHENATED_NAME.findall(text.casefold())]


def build_match_query(text: str, *, max_terms: int = MAX_QUERY_TERMS) -> str | None:
    """Free text -> a safe FTS5 MATCH expression (an OR of quoted terms), or None if nothing is left.

    Every term is a word character run in double quotes, so FTS5 operators and syntax in the input
    (quotes, `-`, `:`, `*`, `AND`, `NOT`, `NEAR`, parentheses) are plain text. Stopwords are dropped
    unless nothing else is left; an OR of terms lets documents that match part of the query rank.
    A hyphenated name ("SHA-256") is searched joined as well (`joined_names`).
    """
    tokens = _TOKEN.findall(text.casefold()) + joined_names(text)
    terms = [t for t in tokens if t not in STOPWORDS] or tokens
    unique = list(dict.fromkeys(terms))[:max_terms]
    if not unique:
        return None
    return " OR ".join(f'"{term}"' for term in unique)


@dataclass
class IndexStats:
    """What one `index_folder` call did."""

    files_added: int = 0
    files_updated: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    files_failed: int = 0
    files_skipped: int = 0  # not regular files (FIFO, socket, device) or over the size limit
    files_read: int = 0  # files whose bytes were read (size or mtime changed, or new)
    files_parsed: int = 0  # files whose content hash changed, so they were parsed
    docs_added: int = 0
    docs_updated: int = 0
    docs_unchanged: int = 0
    docs_removed: int = 0
    docs_total: int = 0  # documents under the folder after indexing
    duration_s: float = 0.0
    files_unsupported: int = 0  # files of a type the index does not read
    # what `research-tool index` names: each file left out and why ("encrypted", "corrupt: ...", "unsupported"),
    # each file cut at a limit (indexed in part), and the files in the index by kind ({"pdf": 3, "docx": 1})
    skipped: list[tuple[str, str]] = field(default_factory=list)
    cut: list[tuple[str, str]] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)

    def add_skipped(self, path: str = "", reason: str = "") -> None:
        self.files_skipped += 1
        if path:
            self.skipped.append((shown_path(path), reason))

    def add_unsupported(self, path: str) -> None:
        self.files_unsupported += 1
        self.skipped.append((shown_path(path), "unsupported"))

    def count_kind(self, path: Path | str) -> None:
        kind = kind_of(path)
        self.kinds[kind] = self.kinds.get(kind, 0) + 1

    def __add__(self, other: IndexStats) -> IndexStats:
        total = IndexStats(**{name: getattr(self, name) + getattr(other, name) for name in _COUNTS})
        total.skipped = [*self.skipped, *other.skipped]
        total.cut = [*self.cut, *other.cut]
        for kinds in (self.kinds, other.kinds):
            for kind, n in kinds.items():
                total.kinds[kind] = total.kinds.get(kind, 0) + n
        return total

    def as_dict(self) -> dict[str, float]:
        """The counts (what logs and `index_summary` take); the lists are attributes of their own."""
        return {name: getattr(self, name) for name in _COUNTS}


_COUNTS = tuple(f.name for f in fields(IndexStats) if f.name not in ("skipped", "cut", "kinds"))


@dataclass(frozen=True)
class CorpusHit:
    """One ranked document. `score` is higher for better matches (negated bm25)."""

    doc_id: str  # the jsonl id, or the file's location for a one-document file
    title: str
    text: str
    url: str
    location: str  # file relative to its root, plus "#id" for a jsonl line
    path: str  # absolute path of the file
    score: float
    snippet: str
    rank: int


@dataclass
class _FileRow:
    path: str
    size: int
    mtime_ns: int
    sha256: str
    doc_count: int
    collection: int


@dataclass
class _PendingWrites:
    files: int = 0
    docs: int = 0
    total_docs_written: int = 0


FileProgress = Callable[[int, int], None]


def skip_reason(exc: DocumentParseError, name: str = "") -> str:
    """How `research-tool index` names a file it left out: the reason word, and the detail when it adds one."""
    if isinstance(exc, MissingExtraError):
        return exc.message
    detail = exc.message.removeprefix(f"{name}: ") if name else exc.message
    if exc.reason in ("encrypted", "too large") or not detail:
        return exc.reason
    return f"{exc.reason}: {detail}"


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


def document_url(path: Path, document: CorpusDocument) -> str:
    """The document's own url, else `file://<absolute path>` (plus `#<id>` for a jsonl line)."""
    if document.url:
        return document.url
    uri = path.resolve().as_uri()
    return f"{uri}#{quote(document.key, safe='')}" if document.key else uri


def _document_hash(document: CorpusDocument, url: str) -> str:
    digest = hashlib.sha1()
    for part in (document.title, document.text, url):
        digest.update(part.encode("utf-8", errors="replace"))
        digest.update(b"\0")
    return digest.hexdigest()


def _fts_table(collection: int) -> str:
    """The FTS5 table of one collection (an int id, so the name is never built from text)."""
    return f"docs_fts_{int(collection)}"


def _prefix_bounds(root: str) -> tuple[str, str]:
    """[low, high) range of paths strictly under the folder `root` (string comparison)."""
    low = root if root.endswith(os.sep) else root + os.sep
    return low, low[:-1] + chr(ord(os.sep) + 1)


def _folder_key(folders: Sequence[Path | str] | None) -> str:
    """Which folders a call works on, for the index pool's per-folder share ("*": every folder)."""
    if folders is None:
        return "*"
    return "\n".join(sorted(os.path.abspath(os.path.expanduser(str(f))) for f in folders))


def shown_path(path: Path | str) -> str:
    """A path as text any log line or database takes: bytes that are not UTF-8 shown as \\x escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _utf8_name(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:  # a name that is not UTF-8 (os.fsdecode keeps its bytes as lone surrogates)
        return False
    return True


def _walk_dirs(root: Path, skip: Callable[[str, str], None]) -> Iterator[tuple[str, list[os.DirEntry[str]]]]:
    """Every folder under `root` (hidden ones and symlinked ones left out) with its sorted entries, top down,
    without recursion: a folder 1,000 levels deep made `os.walk` raise RecursionError (issue 32). A folder
    that cannot be listed or whose name is not UTF-8 is skipped (`skip(path, reason)`), not the whole walk."""
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            skip(folder, f"unreadable folder: {exc.strerror or exc}")
            continue
        yield folder, entries
        subfolders = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if not is_dir:
                continue
            if not _utf8_name(entry.path):
                skip(entry.path, "folder name is not UTF-8")
                continue
            subfolders.append(entry.path)
        stack.extend(reversed(subfolders))


def _walk_supported(
    root: Path, skip: Callable[[str, str], None] | None = None, unsupported: Callable[[str], None] | None = None
) -> Iterator[tuple[Path, os.stat_result]]:
    """Supported files under `root` (a folder or one file), skipping hidden files and folders.

    Symlinked folders are not descended into, but symlinked files are listed: one whose real path leaves
    `root` (`ln -s /etc/passwd notes.txt`) is skipped and logged. A file or folder that cannot be indexed
    (a name that is not UTF-8, a folder that cannot be listed) is named once by `skip` and the walk goes on;
    a file of a type the index does not read is named by `unsupported`.
    """
    if root.is_file():
        yield root, root.stat()
        return

    def skipped(path: str, reason: str) -> None:
        log.warning("local_file_skipped", file=shown_path(path), reason=reason)
        if skip is not None:
            skip(path, reason)

    for dirpath, entries in _walk_dirs(root, skipped):
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    continue
            except OSError:
                continue
            path = Path(dirpath) / name
            if not is_supported(path):
                if unsupported is not None:
                    unsupported(shown_path(path))
                continue
            if not _utf8_name(entry.path):
                skipped(entry.path, "file name is not UTF-8")
                continue
            if path.is_symlink() and not resolves_inside(path, root):
                log.warning("local_file_outside_root", file=str(path), root=str(root))
                if skip is not None:
                    skip(str(path), "outside the folder")
                continue
            try:
                stat = path.stat()
            except OSError:
                continue
            yield path, stat


class CorpusIndex:
    """Index folders of documents and search them. Safe to share between tasks and threads."""

    def __init__(
        self,
        db_path: Path | str | None = None,
        *,
        title_weight: float = DEFAULT_TITLE_WEIGHT,
        body_weight: float = DEFAULT_BODY_WEIGHT,
        names_weight: float = DEFAULT_NAMES_WEIGHT,
        max_file_bytes: int | None = None,
    ) -> None:
        self.db_path = Path(db_path) if db_path is not None else get_settings().db_path("local_index.db")
        # Files larger than this are skipped (default: RESEARCH_CORPUS_MAX_FILE_MB).
        self.max_file_bytes = max_file_bytes if max_file_bytes is not None else get_settings().corpus_max_file_bytes
        self.title_weight = float(title_weight)
        self.body_weight = float(body_weight)
        self.names_weight = float(names_weight)
        self._write_lock = threading.Lock()
        self._schema_lock = threading.Lock()
        self._schema_ready = threading.Event()

    # --- connections and schema ----------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        self._ensure_schema()
        return self._open()

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _ensure_schema(self) -> None:
        if self._schema_ready.is_set():
            return
        with self._schema_lock:
            if self._schema_ready.is_set():  # another thread created it while this one waited
                return
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
            with closing(self._open()) as conn:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version == SCHEMA_VERSION:
                    # Already laid out (another CorpusIndex made it): no write, so concurrent sessions
                    # opening the same file never contend for the write lock here.
                    self._schema_ready.set()
                    return
                conn.execute("PRAGMA journal_mode=WAL")
                if version not in (0, SCHEMA_VERSION):
                    # The index is a cache of the files: an old layout is rebuilt, never migrated.
                    log.info("local_index_rebuilt", db=str(self.db_path), old_version=version)
                    tables = [
                        row[0]
                        for row in conn.execute(
                            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'docs_fts%'"
                        )
                        if re.fullmatch(r"docs_fts(?:_\d+)?", row[0])
                    ]
                    conn.executescript(
                        "".join(f"DROP TABLE IF EXISTS {t};" for t in tables)
                        + "DROP TABLE IF EXISTS docs; DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS collections;"
                    )
                conn.executescript(
                    f"""
                    BEGIN IMMEDIATE;
                    CREATE TABLE IF NOT EXISTS collections (id INTEGER PRIMARY KEY, root TEXT NOT NULL UNIQUE);
                    CREATE TABLE IF NOT EXISTS files (
                        path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
                        sha256 TEXT NOT NULL, indexed_at REAL NOT NULL, collection INTEGER NOT NULL);
                    CREATE TABLE IF NOT EXISTS docs (
                        id INTEGER PRIMARY KEY, path TEXT NOT NULL, doc_key TEXT NOT NULL,
                        url TEXT NOT NULL, doc_hash TEXT NOT NULL, collection INTEGER NOT NULL,
                        UNIQUE (path, doc_key));
                    PRAGMA user_version = {SCHEMA_VERSION};
                    COMMIT;
                    """
                )
            self._schema_ready.set()

    # --- indexing --------------------------------------------------------------------------------

    async def index_folder(self, path: Path | str, *, file_progress: FileProgress | None = None) -> IndexStats:
        """Bring the index up to date with a folder (or one file): add, update and remove documents.
        `file_progress(done, total)` is called (from the index's thread) after each file."""
        return await run_in_index_pool(
            _folder_key([path]),
            lambda cancel: self.index_folder_sync(path, cancel=cancel, file_progress=file_progress),
        )

    def index_folder_sync(
        self, path: Path | str, *, cancel: Cancel | None = None, file_progress: FileProgress | None = None
    ) -> IndexStats:
        root = Path(path).expanduser()
        if not root.exists():
            raise BadInputError(f"corpus folder not found: {root}")
        root = root.resolve()
        if root.is_file() and not is_supported(root):
            raise BadInputError(f"unsupported corpus file type: {root.name} (see README's table of formats)")
        started = time.perf_counter()
        stats = IndexStats()
        with self._write_lock, closing(self._connect()) as conn:
            if cancel is not None:
                cancel.watch(conn)  # a long insert stops too, and the batch since the last commit rolls back
            known = {row.path: row for row in self._known_files(conn, root)}
            pending = _PendingWrites()
            conn.execute("BEGIN IMMEDIATE")
            try:
                collection = self._collection_for(conn, str(root))
                seen: set[str] = set()
                found = list(_walk_supported(root, stats.add_skipped, stats.add_unsupported))
                for done, (file_path, stat) in enumerate(found, start=1):
                    if cancel is not None:
                        cancel.check()  # the caller went away: stop before the next file (committed work stays)
                    key = str(file_path)
                    seen.add(key)
                    self._index_file(conn, root, file_path, stat, known.get(key), stats, pending, collection)
                    if file_progress is not None:
                        file_progress(done, len(found))
                    if pending.files >= _COMMIT_EVERY_FILES or pending.docs >= _COMMIT_EVERY_DOCS:
                        conn.execute("COMMIT")
                        conn.execute("BEGIN IMMEDIATE")
                        pending.files = pending.docs = 0
                for gone in sorted(set(known) - seen):
                    stats.docs_removed += self._delete_file(conn, gone)
                    stats.files_removed += 1
                conn.execute("COMMIT")
            except BaseException:
                conn.set_progress_handler(None, 0)  # the rollback itself is never interrupted
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if pending.total_docs_written >= _OPTIMIZE_AFTER_DOCS:
                table = _fts_table(collection)
                conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
            stats.docs_total = self._count_docs(conn, [str(root)])
        release_workers()
        stats.duration_s = round(time.perf_counter() - started, 4)
        log.info("local_index_updated", root=str(root), **stats.as_dict())
        return stats

    async def remove_folder(self, path: Path | str) -> int:
        """Drop every document under a folder (which may no longer exist) from the index; returns how many."""
        return await run_in_index_pool(_folder_key([path]), lambda _cancel: self.remove_folder_sync(path))

    def remove_folder_sync(self, path: Path | str) -> int:
        root = str(Path(path).expanduser().resolve())
        with self._write_lock, closing(self._connect()) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                # the folder's collection stays, empty (a collection id is never reused: vectors may be keyed by it)
                removed = sum(self._delete_file(conn, row.path) for row in self._known_files(conn, Path(root)))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        log.info("local_folder_removed", root=root, documents=removed)
        return removed

    @staticmethod
    def _collection_for(conn: sqlite3.Connection, root: str) -> int:
        """The collection a folder's new files join: the innermost indexed folder that holds it, else a new
        one (with its own FTS table) rooted at the folder."""
        holders = [
            (len(path), cid)
            for cid, path in conn.execute("SELECT id, root FROM collections")
            if root == path or root.startswith(_prefix_bounds(path)[0])
        ]
        if holders:
            return int(max(holders)[1])
        cid = int(conn.execute("INSERT INTO collections (root) VALUES (?)", (root,)).lastrowid or 0)
        conn.execute(
            f"CREATE VIRTUAL TABLE {_fts_table(cid)} USING fts5(title, body, names, tokenize='porter unicode61')"
        )
        return cid

    def _known_files(self, conn: sqlite3.Connection, root: Path) -> list[_FileRow]:
        low, high = _prefix_bounds(str(root))
        rows = conn.execute(
            """
            SELECT f.path, f.size, f.mtime_ns, f.sha256, COUNT(d.id), f.collection
            FROM files f LEFT JOIN docs d ON d.path = f.path
            WHERE f.path = ? OR (f.path >= ? AND f.path < ?)
            GROUP BY f.path
            """,
            (str(root), low, high),
        ).fetchall()
        return [_FileRow(*row) for row in rows]

    def _index_file(
        self,
        conn: sqlite3.Connection,
        root: Path,
        path: Path,
        stat: os.stat_result,
        known: _FileRow | None,
        stats: IndexStats,
        pending: _PendingWrites,
        collection: int,
    ) -> None:
        key = str(path)
        if known is not None:
            collection = known.collection
        if known is not None and known.size == stat.st_size and known.mtime_ns == stat.st_mtime_ns:
            stats.files_unchanged += 1
            stats.docs_unchanged += known.doc_count
            stats.count_kind(path)
            return
        if not S_ISREG(stat.st_mode) or stat.st_size > self.max_file_bytes:
            self._skip_file(conn, key, stat, known, stats)
            return
        try:
            data = read_bytes_inside(path, root, max_bytes=self.max_file_bytes)
        except (NotRegularFileError, FileTooLargeError) as exc:  # swapped or grown after the walk saw it
            log.warning("local_file_skipped", file=key, reason=exc.error_type, error=exc.message)
            self._skip_file(conn, key, None, known, stats, logged=True, reason=exc.reason)
            return
        except OutsideRootError as exc:
            log.warning("local_file_outside_root", file=key, root=str(root), error=exc.message)
            stats.files_failed += 1
            stats.skipped.append((shown_path(key), exc.reason))
            if known is not None:
                stats.docs_removed += self._delete_file(conn, key)
                stats.files_removed += 1
            return
        except OSError as exc:
            log.warning("local_file_unreadable", file=key, error=str(exc))
            stats.files_failed += 1
            stats.skipped.append((shown_path(key), f"unreadable: {exc.strerror or exc}"))
            return
        stats.files_read += 1
        sha = hashlib.sha256(data).hexdigest()
        if known is not None and known.sha256 == sha:
            conn.execute(
                "UPDATE files SET size = ?, mtime_ns = ?, indexed_at = ? WHERE path = ?",
                (stat.st_size, stat.st_mtime_ns, time.time(), key),
            )
            stats.files_unchanged += 1
            stats.docs_unchanged += known.doc_count
            stats.count_kind(path)
            return
        try:
            documents, cut = read_file(path, data)
        except DocumentParseError as exc:
            log.warning("local_file_unparsable", file=key, reason=exc.reason, error=exc.message)
            if isinstance(exc, MissingExtraError):
                stats.files_skipped += 1
            else:
                stats.files_failed += 1
            stats.skipped.append((shown_path(key), skip_reason(exc, path.name)))
            if known is not None:  # keep nothing stale from a file that is now broken
                stats.docs_removed += self._delete_file(conn, key)
                stats.files_removed += 1
            return
        except Exception as exc:  # a library's own error on a hostile file (nested past recursion...): one file lost
            log.warning("local_file_unparsable", file=key, reason="corrupt", error=repr(exc)[:300])
            stats.files_failed += 1
            stats.skipped.append((shown_path(key), f"corrupt: {type(exc).__name__}"))
            if known is not None:
                stats.docs_removed += self._delete_file(conn, key)
                stats.files_removed += 1
            return
        stats.files_parsed += 1
        stats.count_kind(path)
        if cut:
            log.warning("local_file_cut", file=key, reason=cut)
            stats.cut.append((shown_path(key), cut))
        written = self._replace_documents(conn, path, documents, stats, collection)
        conn.execute(
            "INSERT INTO files (path, size, mtime_ns, sha256, indexed_at, collection) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, "
            "sha256 = excluded.sha256, indexed_at = excluded.indexed_at",
            (key, stat.st_size, stat.st_mtime_ns, sha, time.time(), collection),
        )
        if known is None:
            stats.files_added += 1
        else:
            stats.files_updated += 1
        pending.files += 1
        pending.docs += written
        pending.total_docs_written += written

    def _skip_file(
        self,
        conn: sqlite3.Connection,
        key: str,
        stat: os.stat_result | None,
        known: _FileRow | None,
        stats: IndexStats,
        *,
        logged: bool = False,
        reason: str = "",
    ) -> None:
        """A file the index does not read (not a regular file, or over the size limit): counted, logged, and
        whatever it held before removed."""
        if not logged and stat is not None:
            kind = "not_a_regular_file" if not S_ISREG(stat.st_mode) else "file_too_large"
            log.warning("local_file_skipped", file=key, reason=kind, size=stat.st_size, max_bytes=self.max_file_bytes)
            reason = "not a regular file" if not S_ISREG(stat.st_mode) else f"too large ({_mb(stat.st_size)})"
        stats.add_skipped(key, reason or "skipped")
        if known is not None:
            stats.docs_removed += self._delete_file(conn, key)
            stats.files_removed += 1

    def _replace_documents(
        self,
        conn: sqlite3.Connection,
        path: Path,
        documents: Sequence[CorpusDocument],
        stats: IndexStats,
        collection: int,
    ) -> int:
        """Write one file's documents, touching only those whose content changed. Returns rows written."""
        key = str(path)
        table = _fts_table(collection)
        old = {
            doc_key: (row_id, doc_hash)
            for row_id, doc_key, doc_hash in conn.execute(
                "SELECT id, doc_key, doc_hash FROM docs WHERE path = ?", (key,)
            )
        }
        inserts: list[tuple[str, str, str, str, str, str]] = []
        written = 0
        new_keys: set[str] = set()
        for document in documents:
            new_keys.add(document.key)
            url = document_url(path, document)
            doc_hash = _document_hash(document, url)
            previous = old.get(document.key)
            if previous is not None and previous[1] == doc_hash:
                stats.docs_unchanged += 1
                continue
            if previous is not None:
                row_id = previous[0]
                conn.execute("UPDATE docs SET url = ?, doc_hash = ? WHERE id = ?", (url, doc_hash, row_id))
                conn.execute(f"DELETE FROM {table} WHERE rowid = ?", (row_id,))
                conn.execute(
                    f"INSERT INTO {table} (rowid, title, body, names) VALUES (?, ?, ?, ?)",
                    (row_id, document.title, document.text, name_parts(document.title)),
                )
                stats.docs_updated += 1
                written += 1
            else:
                inserts.append((key, document.key, url, doc_hash, document.title, document.text))
        gone = [row_id for doc_key, (row_id, _) in old.items() if doc_key not in new_keys]
        if gone:
            self._delete_rows(conn, gone)
            stats.docs_removed += len(gone)
        if inserts:
            start = conn.execute("SELECT COALESCE(MAX(id), 0) FROM docs").fetchone()[0] + 1
            conn.executemany(
                "INSERT INTO docs (id, path, doc_key, url, doc_hash, collection) VALUES (?, ?, ?, ?, ?, ?)",
                ((start + i, p, k, u, h, collection) for i, (p, k, u, h, _, _) in enumerate(inserts)),
            )
            conn.executemany(
                f"INSERT INTO {table} (rowid, title, body, names) VALUES (?, ?, ?, ?)",
                ((start + i, t, b, name_parts(t)) for i, (_, _, _, _, t, b) in enumerate(inserts)),
            )
            stats.docs_added += len(inserts)
            written += len(inserts)
        return written

    @staticmethod
    def _delete_rows(conn: sqlite3.Connection, row_ids: Iterable[int]) -> None:
        ids = list(row_ids)
        by_collection: dict[int, list[tuple[int]]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row_id, cid in conn.execute(f"SELECT id, collection FROM docs WHERE id IN ({marks})", chunk):
                by_collection.setdefault(int(cid), []).append((int(row_id),))
        for cid, rows in by_collection.items():
            conn.executemany(f"DELETE FROM {_fts_table(cid)} WHERE rowid = ?", rows)
        conn.executemany("DELETE FROM docs WHERE id = ?", [(row_id,) for row_id in ids])

    def _delete_file(self, conn: sqlite3.Connection, path: str) -> int:
        row_ids = [row[0] for row in conn.execute("SELECT id FROM docs WHERE path = ?", (path,))]
        self._delete_rows(conn, row_ids)
        conn.execute("DELETE FROM files WHERE path = ?", (path,))
        return len(row_ids)

    def _count_docs(self, conn: sqlite3.Connection, roots: Sequence[str]) -> int:
        clause, params = self._roots_clause(roots)
        return int(conn.execute(f"SELECT COUNT(*) FROM docs d WHERE {clause}", params).fetchone()[0])

    # --- searching -------------------------------------------------------------------------------

    async def search(
        self, query: str, *, roots: Sequence[Path | str] | None = None, limit: int = 10
    ) -> list[CorpusHit]:
        """Ranked documents for free text, restricted to documents under `roots` when given."""
        return await run_in_index_pool(
            _folder_key(roots), lambda cancel: self.search_sync(query, roots=roots, limit=limit, cancel=cancel)
        )

    def search_sync(
        self,
        query: str,
        *,
        roots: Sequence[Path | str] | None = None,
        limit: int = 10,
        cancel: Cancel | None = None,
    ) -> list[CorpusHit]:
        """The ranked hits; with `cancel`, a statement in progress is aborted once it is set (FTS5's `snippet()`
        over a document dense with the query's terms can take minutes)."""
        match = build_match_query(query)
        if match is None or limit <= 0:
            return []
        root_strs = [str(Path(r).expanduser().resolve()) for r in roots] if roots is not None else None
        if root_strs is not None and not root_strs:
            return []
        clause, params = self._roots_clause(root_strs)
        with closing(self._connect()) as conn:
            if cancel is not None:
                cancel.watch(conn)
            ranked: list[tuple[int, float]] = []
            details: dict[int, tuple[str, str, str, str, str, str | None]] = {}
            for collection in self._collections(conn, root_strs):
                table = _fts_table(collection)
                rows = conn.execute(
                    f"""
                    SELECT f.rowid, bm25({table}, ?, ?, ?) AS score
                    FROM {table} f JOIN docs d ON d.id = f.rowid
                    WHERE {table} MATCH ? AND {clause}
                    ORDER BY score LIMIT ?
                    """,
                    (self.title_weight, self.body_weight, self.names_weight, match, *params, limit),
                ).fetchall()
                if not rows:
                    continue
                ranked += rows
                placeholders = ",".join("?" * len(rows))
                for row in conn.execute(
                    f"""
                    SELECT f.rowid, d.path, d.doc_key, d.url, f.title, f.body,
                           CASE WHEN length(f.body) <= {FTS_SNIPPET_MAX_CHARS}
                                THEN snippet({table}, 1, '', '', ' … ', {SNIPPET_TOKENS}) END
                    FROM {table} f JOIN docs d ON d.id = f.rowid
                    WHERE {table} MATCH ? AND f.rowid IN ({placeholders})
                    """,
                    (match, *(row_id for row_id, _ in rows)),
                ):
                    details[row[0]] = row[1:]
            ranked = sorted(ranked, key=lambda r: (r[1], r[0]))[:limit]
            if not ranked:
                return []
        hits: list[CorpusHit] = []
        for rank, (row_id, score) in enumerate(ranked, start=1):
            path, doc_key, url, title, body, snippet = details[row_id]
            if snippet is None:
                snippet = long_snippet(body, match)
            location = _location(path, doc_key, root_strs)
            hits.append(
                CorpusHit(
                    doc_id=doc_key or location,
                    title=title,
                    text=body,
                    url=url,
                    location=location,
                    path=path,
                    score=-float(score),
                    snippet=re.sub(r"\s+", " ", snippet).strip(),
                    rank=rank,
                )
            )
        return hits

    async def texts(self, urls: Sequence[str]) -> dict[str, str]:
        """The indexed text of each document url there is one for (the first document of a url)."""
        return await run_in_index_pool(_folder_key(None), lambda _cancel: self.texts_sync(urls))

    def texts_sync(self, urls: Sequence[str]) -> dict[str, str]:
        """Sessions keep a local document's text here, by reference, instead of a copy (issue 24)."""
        wanted = list(dict.fromkeys(urls))
        found: dict[str, str] = {}
        with closing(self._connect()) as conn:
            for start in range(0, len(wanted), 400):
                chunk = wanted[start : start + 400]
                rows = conn.execute(
                    f"SELECT id, url, collection FROM docs WHERE url IN ({','.join('?' * len(chunk))}) ORDER BY id",
                    chunk,
                ).fetchall()
                for row_id, url, collection in rows:
                    if url in found:
                        continue
                    body = conn.execute(
                        f"SELECT body FROM {_fts_table(int(collection))} WHERE rowid = ?", (row_id,)
                    ).fetchone()
                    if body is not None:
                        found[str(url)] = str(body[0])
        return found

    @staticmethod
    def _collections(conn: sqlite3.Connection, roots: Sequence[str] | None) -> list[int]:
        """Collections that may hold documents under `roots`: those inside a root, or holding one."""
        found = []
        for cid, path in conn.execute("SELECT id, root FROM collections ORDER BY id"):
            if roots is None or any(
                path == r or path.startswith(_prefix_bounds(r)[0]) or r.startswith(_prefix_bounds(path)[0])
                for r in roots
            ):
                found.append(int(cid))
        return found

    @staticmethod
    def _roots_clause(roots: Sequence[str] | None) -> tuple[str, list[str]]:
        if roots is None:
            return "1", []
        parts: list[str] = []
        params: list[str] = []
        for root in roots:
            low, high = _prefix_bounds(root)
            parts.append("(d.path = ? OR (d.path >= ? AND d.path < ?))")
            params.extend((root, low, high))
        return "(" + " OR ".join(parts) + ")", params


def long_snippet(body: str, match: str, tokens: int = SNIPPET_TOKENS) -> str:
    """A snippet of a long document in linear time: the run of `tokens` words holding the most distinct query
    terms (then the most hits) within its first _SNIPPET_SCAN_CHARS characters. A word counts for a term when
    their first five letters agree (a rough stand-in for the porter stemmer FTS5 matches with)."""
    text = body[:_SNIPPET_SCAN_CHARS]
    term_ids = {term[:5]: i for i, term in enumerate(re.findall(r'"([^"]+)"', match))}
    starts: list[int] = []
    ends: list[int] = []
    hits: list[int] = []  # term id of each word, -1 for none
    for found in _TOKEN.finditer(text):
        word = found.group().casefold()
        starts.append(found.start())
        ends.append(found.end())
        hits.append(term_ids.get(word[:5], -1) if len(word) >= 5 else term_ids.get(word, -1))
    if not starts:
        return text[:200]
    counts = [0] * len(term_ids)
    distinct = total = 0
    best = (-1, -1, 0)
    for i, term in enumerate(hits):
        if term >= 0:
            distinct += counts[term] == 0
            counts[term] += 1
            total += 1
        left = i - tokens
        if left >= 0 and hits[left] >= 0:
            counts[hits[left]] -= 1
            distinct -= counts[hits[left]] == 0
            total -= 1
        first = max(0, left + 1)
        if (distinct, total) > best[:2]:
            best = (distinct, total, first)
    first = best[2]
    inside = [j for j in range(first, min(len(hits), first + tokens)) if hits[j] >= 0]
    if inside:  # the window's hits in its middle, as snippet() places them
        first = max(0, min((inside[0] + inside[-1]) // 2 - tokens // 2, len(starts) - tokens))
    last = min(len(starts), first + tokens) - 1
    snippet = text[starts[first] : ends[last]]
    prefix = "… " if first > 0 else ""
    suffix = " …" if last < len(starts) - 1 or len(body) > len(text) else ""
    return prefix + snippet + suffix


def _location(path: str, doc_key: str, roots: Sequence[str] | None) -> str:
    """The file relative to the (innermost) root that holds it, plus `#id` for a jsonl line."""
    relative = os.path.basename(path)
    best = -1
    for root in roots or ():
        if path == root:
            relative, best = os.path.basename(path), len(root)
        elif path.startswith(_prefix_bounds(root)[0]) and len(root) > best:
            relative, best = os.path.relpath(path, root), len(root)
    relative = relative.replace(os.sep, "/")
    return f"{relative}#{doc_key}" if doc_key else relative
