"""How-to retrieval over API pages (issue 46): the page of the asked API reaches the sources the answer reads.

Small pydoc-like folders written for these tests (a page per API: "name — synopsis", its signature, its docstring),
each showing one cause of a missed page: a hyphenated name the tokenizer cut ("SHA-256"), and a question sharing
no word with its API's page, which only the demo corpus's dense vectors (`make run` indexes them) bring in. A
question about an API the folder does not document is answered "the sources do not answer", vectors or not.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from research_tool.core.settings import Settings
from research_tool.providers.local_corpus.embeddings import ENCODER_DIR_ENV, unavailable_reason
from research_tool.providers.local_corpus.hybrid import HybridIndex, open_corpus_index
from research_tool.providers.local_corpus.index import CorpusIndex, build_match_query, joined_names
from tests.support.sessions import local_request, run_session

REPO = Path(__file__).resolve().parents[1]
REASON = unavailable_reason(allow_download=False)
needs_encoder = pytest.mark.skipif(REASON is not None, reason=f"semantic extra or weights absent: {REASON}")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(ENCODER_DIR_ENV, raising=False)


def api_folder(root: Path, pages: dict[str, tuple[str, str]]) -> Path:
    """One page per API, as the demo corpus writes them: "name — synopsis", then the signature, then the text."""
    folder = root / "api"
    folder.mkdir(parents=True)
    for name, (synopsis, signature) in pages.items():
        (folder / f"{name}.txt").write_text(f"{name} — {synopsis}\n\n{signature}\n\n{synopsis}\n", encoding="utf-8")
    return folder


HASHES = {
    "hashkit.sha256": ("Return a new hash object, initialised with data.", "hashkit.sha256(data=b'')"),
    "hashkit.sha3_256": ("Return a new SHA3 hash object with a hashing bit-length of 256 bits.", "hashkit.sha3_256()"),
    "hashkit.sha512": ("Return a new SHA-2 hash object of 512 bits.", "hashkit.sha512(data=b'')"),
    "hashkit.file_digest": ("Hash the contents of a file object.", "hashkit.file_digest(fileobj, digest)"),
    "hashkit.blake2b": ("Return a new BLAKE2b hash object.", "hashkit.blake2b(data=b'')"),
}

THREADS = {
    "locks.Mutex": (
        "A primitive lock: while one holder has acquired it, every other caller blocks until it is released.",
        "locks.Mutex()",
    ),
    "threads.Thread.start": ("Start the thread's activity.", "threads.Thread.start(self)"),
    "threads.Thread": ("A thread of control that runs a target function.", "threads.Thread(target=None)"),
    "variables.Variable.write": ("Write a new value to the variable.", "variables.Variable.write(self, value)"),
    "variables.Variable": ("A named variable that keeps one value.", "variables.Variable(name)"),
    "files.write_same": ("Write the same bytes to every file in a list.", "files.write_same(paths, data)"),
    "timing.simultaneously": ("Return whether two events were recorded simultaneously.", "timing.simultaneously(a, b)"),
    "twos.pair": ("Two values kept together as a pair.", "twos.pair(a, b)"),
}


def test_a_hyphenated_name_is_searched_as_the_identifier_writes_it() -> None:
    assert joined_names("the SHA-256 or UTF-8 of x-1-y") == ["sha256", "utf8"]
    match = build_match_query("How do I compute the SHA-256 hash of a file?")
    assert match is not None and '"sha256"' in match and '"sha"' in match and '"256"' in match


async def test_the_sha_256_question_finds_sha256_not_sha3_256(tmp_path: Path) -> None:
    """ "SHA-256" was searched as "sha" and "256": `sha3_256` has both in its title, `sha256` neither as a word, so
    the SHA-3 page led; joined, the query names `sha256` as its title spells it."""
    folder = api_folder(tmp_path, HASHES)
    index = CorpusIndex(tmp_path / "index.db")
    await index.index_folder(folder)
    hits = await index.search("How do I compute the SHA-256 hash of a file?", roots=[folder], limit=3)
    assert hits[0].title.startswith("hashkit.sha256 — "), [h.title for h in hits]


@needs_encoder
async def test_a_page_sharing_no_word_with_the_question_is_found_only_with_vectors(tmp_path: Path) -> None:
    """The lock's page says none of "threads take turns when they write a variable": BM25 cannot find it at all;
    the folder's dense vectors bring it among the five a source budget keeps."""
    folder = api_folder(tmp_path, THREADS)
    question = "How can I make threads take turns when they write a variable?"
    plain = CorpusIndex(tmp_path / "plain.db")
    await plain.index_folder(folder)
    assert "locks.Mutex" not in [h.title.split(" — ")[0] for h in await plain.search(question, roots=[folder])]
    hybrid = HybridIndex(tmp_path / "hybrid.db", embed_new=True)
    await hybrid.index_folder(folder)
    found = [h.title.split(" — ")[0] for h in await hybrid.search(question, roots=[folder], limit=5)]
    assert "locks.Mutex" in found, found


@pytest.mark.parametrize("vectors", [False, pytest.param(True, marks=needs_encoder)])
async def test_an_api_the_folder_does_not_document_is_refused(tmp_path: Path, vectors: bool) -> None:
    """A builtin or another library's API has no page here: the answer says the sources do not answer, with no
    call as its short answer, though the dense side always brings the nearest pages."""
    folder = api_folder(tmp_path, HASHES | THREADS)
    settings = Settings(data_dir=tmp_path / "data")
    index = open_corpus_index(settings.db_path("local_index.db"), semantic=vectors)
    await index.index_folder(folder)
    question = "How do I draw a bar chart of my sales figures?"
    result = await run_session(settings, local_request(folder, question, tier="simple"))
    assert result.report is not None
    assert result.report["answered"] is False, result.report["answer"]
    assert not result.report.get("short_answer")


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_indexes_the_demo_corpus_with_vectors_only_when_told_to() -> None:
    def commands(*extra: str) -> str:
        done = subprocess.run(
            ["make", "-n", "-s", "run", "RUN_DEPS=", *extra], cwd=REPO, capture_output=True, text=True, check=True
        )
        return done.stdout

    assert 'if [ "0" != 0 ]' in commands()
    assert 'if [ "1" != 0 ]' in commands("DEMO_VECTORS=1")
