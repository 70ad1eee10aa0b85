"""The `make run` demo corpus: built from the standard library's docstrings, idempotent, answers the demo question."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from research_tool.core.errors import BadInputError
from research_tool.demo_corpus import (
    DEMO_MODULES,
    MARKER_FILE,
    build_demo_corpus,
    first_sentence,
    is_built,
    main,
    reflow,
)
from research_tool.providers.local_corpus.index import CorpusIndex

DEMO_QUESTION = "How do I run a subprocess with a timeout in Python and capture its output?"
SMALL = ("subprocess", "json", "shlex")


def test_small_build_has_one_document_per_module_member_and_method(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    count = build_demo_corpus(target, SMALL)
    files = sorted(p.name for p in target.glob("*.txt"))
    assert count == len(files) > 20
    for name in (
        "subprocess.txt",
        "subprocess.run.txt",
        "subprocess.Popen.txt",
        "subprocess.Popen.communicate.txt",
        "subprocess.TimeoutExpired.txt",
        "json.loads.txt",
        "shlex.split.txt",
    ):
        assert name in files
    run_doc = (target / "subprocess.run.txt").read_text(encoding="utf-8")
    title, _, body = run_doc.partition("\n\n")
    assert title == "subprocess.run — Run command with arguments and return a CompletedProcess instance."
    assert "capture_output=True" in body
    assert "If timeout is given, and the process takes too long, a TimeoutExpired exception will be raised." in body
    assert "timeout=None" in body  # the signature
    overview = (target / "subprocess.txt").read_text(encoding="utf-8")
    assert overview.startswith("subprocess — Subprocesses with accessible I/O streams")
    assert "Functions in subprocess: call, check_call, check_output" in overview


def test_second_build_is_a_no_op(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    assert build_demo_corpus(target, SMALL)
    before = {p.name: p.stat().st_mtime_ns for p in target.iterdir()}
    assert is_built(target, SMALL)
    assert build_demo_corpus(target, SMALL) is None
    assert {p.name: p.stat().st_mtime_ns for p in target.iterdir()} == before
    # A different module list is a different corpus: rebuilt in place, no leftovers beside it.
    assert build_demo_corpus(target, ("json",))
    assert not (target / "subprocess.run.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]


def test_refuses_to_replace_a_folder_that_is_not_a_demo_corpus(tmp_path: Path) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.md").write_text("# My notes\n", encoding="utf-8")
    with pytest.raises(BadInputError, match="not a demo corpus"):
        build_demo_corpus(target, SMALL)
    assert (target / "notes.md").exists()


def test_missing_modules_are_skipped(tmp_path: Path) -> None:
    count = build_demo_corpus(tmp_path / "demo", ("json", "no_such_module_xyz"))
    assert count and (tmp_path / "demo" / "json.txt").exists()


def test_main_prints_nothing_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "demo")]) == 0
    first = capsys.readouterr()
    assert first.out == "" and first.err.count("\n") == 1
    assert main([str(tmp_path / "demo")]) == 0
    assert capsys.readouterr() == ("", "")
    assert main([]) == 2


def test_reflow_joins_prose_and_keeps_lists() -> None:
    doc = "First line\nwraps here.\n\n  indented\n  code\n\n- item one\n- item two"
    assert reflow(doc) == "First line wraps here.\n\n  indented\n  code\n\n- item one\n- item two"
    assert first_sentence("Run it now. Then more.\n\nDetails.") == "Run it now."


@pytest.mark.slow
async def test_full_corpus_answers_the_demo_question(tmp_path: Path) -> None:
    target = tmp_path / "demo_corpus"
    count = build_demo_corpus(target)
    assert count is not None and count > 1000
    assert (target / MARKER_FILE).exists()
    index = CorpusIndex(tmp_path / "index.db")
    stats = await index.index_folder(target)
    assert stats.docs_total == count
    hits = await index.search(DEMO_QUESTION, roots=[target], limit=10)
    locations = [h.location for h in hits]
    assert locations[0] == "subprocess.run.txt"
    assert "subprocess.TimeoutExpired.txt" in locations
    assert len({h.location for h in hits if h.location.startswith("subprocess")}) >= 5
    text = hits[0].text
    assert "timeout" in text and "capture_output" in text and "TimeoutExpired" in text
    # Questions like it find their module too.
    for question, expected in [
        ("How do I parse JSON from a string?", "json."),
        ("How can I make a temporary directory?", "tempfile."),
        ("How do I run coroutines concurrently and wait for them with a timeout?", "asyncio."),
        ("How do I read and write CSV files?", "csv."),
    ]:
        top = await index.search(question, roots=[target], limit=3)
        assert any(h.location.startswith(expected) for h in top), (question, [h.location for h in top])


def test_module_list_is_standard_library_only() -> None:
    assert len(DEMO_MODULES) >= 40
    stdlib = set(sys.stdlib_module_names)
    assert all(name.split(".")[0] in stdlib for name in DEMO_MODULES)


@pytest.mark.slow
def test_runs_as_a_module(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "research_tool.demo_corpus", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0 and result.stdout == ""
    assert (tmp_path / "d" / "subprocess.run.txt").exists()
