"""Issue 32 items 8 and 11, run as the red team ran them: `index` on a folder with a file name that is not
UTF-8, a folder name that is not UTF-8 and a folder 1,000 levels deep (a traceback and exit 1, nothing
indexed); `serve` and `sessions` with a symlink, a directory or a FIFO where owner.lock goes (the symlink's
target overwritten with the PID, a traceback, a hang)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from research_tool.core.settings import Settings
from research_tool.runtime.http_server import open_serving_warning

from .conftest import DOCS, run_cli

DEPTH = 1000


def deep_folder(root: Path, depth: int) -> Path:
    """`root/d/d/.../d` (`depth` levels), made one level at a time (os.makedirs itself recurses)."""
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        note = os.open("deep.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(note, b"# Deep kettle notes\n\nA kettle deep down in the folders still boils water.")
        os.close(note)
    finally:
        os.close(fd)
    return root


def remove_deep(root: Path, depth: int) -> None:
    """Remove what `deep_folder` made, innermost first: shutil.rmtree (pytest's own tmp cleanup included)
    recurses and raises RecursionError on a folder this deep."""
    path = os.path.join(str(root), *(["d"] * depth))
    os.remove(os.path.join(path, "deep.md"))
    for _ in range(depth):
        os.rmdir(path)
        path = os.path.dirname(path)


@pytest.fixture
def deep_corpus(corpus: Path) -> Iterator[Path]:
    deep_folder(corpus, DEPTH)
    try:
        yield corpus
    finally:
        remove_deep(corpus, DEPTH)


def test_index_skips_what_it_cannot_read_names_it_and_indexes_the_rest(deep_corpus: Path, tmp_path: Path) -> None:
    corpus = deep_corpus
    folder = os.fsencode(corpus)
    with open(folder + b"/bad-\xff-name.md", "wb") as handle:
        handle.write(b"# Unreadable name\n\nThis file's name is not UTF-8.")
    os.mkdir(folder + b"/folder-\xfe")
    with open(folder + b"/folder-\xfe/inside.md", "wb") as handle:
        handle.write(b"# Inside\n\nA file in a folder whose name is not UTF-8.")

    indexed = run_cli(tmp_path / "data", "index", str(corpus))
    assert indexed.returncode == 0, indexed.stderr[-2000:]
    assert "Traceback" not in indexed.stderr
    skipped = [line for line in indexed.stderr.splitlines() if "local_file_skipped" in line]
    assert len(skipped) == 2 and "bad-\\xff-name.md" in skipped[0] + skipped[1]
    assert "folder-\\xfe" in skipped[0] + skipped[1]
    summary = indexed.stderr.splitlines()[-1]  # "Indexed DIR: N documents (N new, ...; 2 files skipped) in 0.1 s."
    new = re.search(r"\((\d+) new", summary)
    assert new is not None and int(new.group(1)) == len(DOCS) + 1, summary  # + the deep one
    assert "2 files skipped" in summary, summary


@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo"])
def test_owner_lock_that_is_not_a_regular_file_is_one_line_never_followed(tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n", encoding="utf-8")
    lock = data / "owner.lock"
    if kind == "symlink":
        lock.symlink_to(target)
    elif kind == "directory":
        lock.mkdir()
    else:
        os.mkfifo(lock)

    served = run_cli(data, "serve", "--port", "9", timeout=30)
    assert served.returncode == 2, served.stderr
    lines = served.stderr.strip().splitlines()
    assert len(lines) == 1 and "owner.lock" in lines[0] and "Traceback" not in served.stderr
    assert target.read_text(encoding="utf-8") == "keep me\n"

    listed = run_cli(data, "sessions", timeout=30)  # a FIFO used to block the reader's open for good
    assert listed.returncode == 0, listed.stderr


def test_serve_warns_when_unauthenticated_on_a_reachable_address() -> None:
    settings = Settings(_env_file=None, api_token=None)  # type: ignore[call-arg]
    warning = open_serving_warning(settings, "0.0.0.0", allow_unauthenticated=True)
    assert warning is not None and "without RESEARCH_API_TOKEN" in warning
    assert open_serving_warning(settings, "127.0.0.1", allow_unauthenticated=True) is None
    assert open_serving_warning(settings, "0.0.0.0", allow_unauthenticated=False) is None  # refused instead
