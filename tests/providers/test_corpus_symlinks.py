"""Symlinked files never carry text from outside the corpus folder into the index (issue 10 item 1)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from research_tool.providers.local_corpus import index as corpus_index
from research_tool.providers.local_corpus.index import CorpusIndex

SECRET = "root:x:0:0:zanzibar secret line"


@pytest.fixture
def outside_secret(tmp_path: Path) -> Path:
    secret = tmp_path / "outside" / "passwd"
    secret.parent.mkdir()
    secret.write_text(SECRET + "\n", encoding="utf-8")
    return secret


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "notes.txt").write_text("Kettle notes\n\nBoiling water for tea takes three minutes.\n", encoding="utf-8")
    return root


async def test_symlinked_file_leaving_the_root_is_skipped_and_logged(
    tmp_path: Path, corpus: Path, outside_secret: Path
) -> None:
    (corpus / "passwd.txt").symlink_to(outside_secret)
    (corpus / "alias.txt").symlink_to(corpus / "notes.txt")  # a symlink that stays inside is fine
    index = CorpusIndex(tmp_path / "index.db")
    with capture_logs() as logs:
        stats = await index.index_folder(corpus)
    assert await index.search("zanzibar secret", roots=[corpus]) == []
    assert stats.docs_total == 2
    assert [e["file"] for e in logs if e["event"] == "local_file_outside_root"] == [str(corpus / "passwd.txt")]
    kettle = await index.search("kettle", roots=[corpus])
    assert {hit.location for hit in kettle} == {"notes.txt", "alias.txt"}


async def test_file_swapped_for_a_symlink_after_the_walk_is_refused_at_read_time(
    tmp_path: Path, corpus: Path, outside_secret: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = corpus / "later.txt"
    target.write_text("An innocent file about sourdough.\n", encoding="utf-8")
    real_walk = corpus_index._walk_supported

    def walk_then_swap(root: Path, *skip: Any) -> Iterator[tuple[Path, os.stat_result]]:
        for path, stat in real_walk(root, *skip):
            if path == target:  # the race: the walk saw a regular file, the reader meets a symlink
                path.unlink()
                path.symlink_to(outside_secret)
            yield path, stat

    monkeypatch.setattr(corpus_index, "_walk_supported", walk_then_swap)
    index = CorpusIndex(tmp_path / "index.db")
    with capture_logs() as logs:
        stats = await index.index_folder(corpus)
    assert await index.search("zanzibar secret", roots=[corpus]) == []
    assert stats.files_failed == 1
    assert any(e["event"] == "local_file_outside_root" for e in logs)


async def test_file_that_became_an_escaping_symlink_leaves_the_index(
    tmp_path: Path, corpus: Path, outside_secret: Path
) -> None:
    index = CorpusIndex(tmp_path / "index.db")
    (corpus / "swap.txt").write_text("Zanzibar spice notes.\n", encoding="utf-8")
    await index.index_folder(corpus)
    assert await index.search("zanzibar", roots=[corpus])
    (corpus / "swap.txt").unlink()
    (corpus / "swap.txt").symlink_to(outside_secret)
    await index.index_folder(corpus)
    assert await index.search("zanzibar", roots=[corpus]) == []
