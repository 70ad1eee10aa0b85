"""`research-tool index` tells what it did (issue 42): its last line counts the files it read by kind, each file
it left out is named once before it with the reason, and `index --list` / `index --remove DIR` show and drop the
indexed folders (a removed folder is no longer searched)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import run_cli

pytest.importorskip("docx", reason="needs the `documents` extra (pip install 'research-tool[documents]')")

from research_tool.bench import document_files as files


def test_index_counts_by_kind_and_names_each_skipped_file(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    files.write_docx(folder / "report.docx")
    files.write_csv(folder / "stations.csv")
    (folder / "notes.md").write_text("# Notes\n\nThe shed key is under the blue pot.", encoding="utf-8")
    files.encrypted_pdf(folder / "locked.pdf")
    (folder / "broken.pptx").write_bytes(b"PK\x03\x04 not really a deck")
    (folder / "drawing.svg").write_text("<svg/>", encoding="utf-8")

    done = run_cli(tmp_path / "data", "index", str(folder))
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("20")]  # log lines carry a date
    assert "Traceback" not in done.stderr
    assert lines[-1].startswith(f"Indexed {folder.resolve()}: ")
    assert "from 3 files (1 csv, 1 docx, 1 markdown)" in lines[-1], lines[-1]
    skipped = [line for line in lines if line.startswith("Skipped ")]
    assert "Skipped locked.pdf: encrypted" in skipped
    assert any(line.startswith("Skipped broken.pptx: corrupt: ") for line in skipped), skipped
    assert "Skipped drawing.svg: unsupported file type" in skipped
    assert len(skipped) == 3

    again = run_cli(tmp_path / "data", "index", str(folder))  # unchanged: named again, nothing re-read
    assert "0 new, 0 changed, 0 removed" in again.stderr.splitlines()[-1]


def test_index_list_and_remove(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, text in ((first, "The shed key is under the blue pot."), (second, "The gate code is 4471.")):
        folder.mkdir()
        (folder / "note.md").write_text(f"# Note\n\n{text}", encoding="utf-8")
        assert run_cli(tmp_path / "data", "index", str(folder)).returncode == 0

    listed = run_cli(tmp_path / "data", "index", "--list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [str(first.resolve()), str(second.resolve())]

    removed = run_cli(tmp_path / "data", "index", "--remove", str(first))
    assert removed.returncode == 0, removed.stderr
    assert f"Removed {first.resolve()} from the index: 1 document" in removed.stderr
    assert run_cli(tmp_path / "data", "index", "--list").stdout.splitlines() == [str(second.resolve())]
    found = run_cli(tmp_path / "data", "search", "--provider", "local", "shed key blue pot", "--json")
    assert found.returncode == 0, found.stderr
    assert "first" not in found.stdout

    again = run_cli(tmp_path / "data", "index", "--remove", str(first))
    assert again.returncode == 2 and "not an indexed folder" in again.stderr
