"""A newcomer with no network (issue 24, items 1 and 2): the folder `research-tool index` indexed is the `local`
provider's folder for `run` and `providers`, and a run with the default providers, every web provider unreachable,
uses that folder, ends, and says once in its report which providers failed and why.

Every web provider's base URL is an unresolvable name (`nonexistent.invalid`): the failures happen in the resolver,
nothing leaves the host.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from research_tool.core.settings import PROVIDER_NAMES
from tests.cli.conftest import QUESTION, run_cli

UNREACHABLE = {f"RESEARCH_{name.upper()}_BASE_URL": "http://nonexistent.invalid" for name in PROVIDER_NAMES}


def test_providers_says_local_searches_the_indexed_folder(tmp_path: Path, corpus: Path) -> None:
    data = tmp_path / "data"
    before = {row["name"]: row for row in json.loads(run_cli(data, "providers", "--json").stdout)}
    assert before["local"]["available"] is False and "research-tool index" in before["local"]["reason"]

    assert run_cli(data, "index", str(corpus)).returncode == 0
    listed = run_cli(data, "providers", "--json")
    assert listed.returncode == 0, listed.stderr
    local = {row["name"]: row for row in json.loads(listed.stdout)}["local"]
    assert local["available"] is True and local["folders"] == [str(corpus.resolve())]
    table = run_cli(data, "providers", COLUMNS="200")
    assert f"folders: {corpus.resolve()}" in table.stdout


def test_run_with_local_only_uses_the_indexed_folder(tmp_path: Path, corpus: Path) -> None:
    data = tmp_path / "data"
    assert run_cli(data, "index", str(corpus)).returncode == 0
    out = tmp_path / "report.json"
    done = run_cli(
        data, "run", QUESTION, "--providers", "local", "--tier", "simple", "--no-clarify", "--format", "json",
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert any("kettle.md" in c["url"] for c in report["citations"])
    assert report["metadata"]["degraded_mode"] is False and report["metadata"]["provider_failures"] == []


def test_a_run_with_no_network_uses_the_indexed_folder_and_names_the_failed_providers_once(
    tmp_path: Path, corpus: Path
) -> None:
    data = tmp_path / "data"
    assert run_cli(data, "index", str(corpus)).returncode == 0
    out = tmp_path / "report.json"
    done = run_cli(data, "run", QUESTION, "--no-clarify", "--format", "json", "--out", str(out), **UNREACHABLE)
    assert done.returncode == 0, done.stderr
    # provider warnings are not printed between the progress lines
    assert "provider_failed" not in done.stderr and "circuit_opened" not in done.stderr

    report = json.loads(out.read_text())
    meta = report["metadata"]
    assert any("kettle.md" in c["url"] for c in report["citations"])  # the indexed folder was searched
    failed = {f["provider"]: f for f in meta["provider_failures"]}
    assert failed and "local" not in failed
    for failure in failed.values():
        assert failure["failed"] == failure["calls"]
        assert set(failure["reasons"]) <= {"dns", "circuit_open"} and failure["reasons"].get("dns", 0) >= 1
    assert meta["degraded_mode"] is True
    reason = meta["degraded_reason"]
    for name in failed:
        assert reason.count(f"{name}:") == 1
    assert "host not found (DNS)" in reason

    # the event log: one event per provider and cycle for the refused searches, not one per search
    with closing(sqlite3.connect(data / "sessions.db")) as db:
        errors = [json.loads(d) for (d,) in db.execute("SELECT data FROM events WHERE type = 'provider_error'")]
    refused = [(e["provider"], e["iteration"]) for e in errors if e["error_type"] == "circuit_open"]
    assert refused and len(refused) == len(set(refused))
    assert sum(e.get("refused", 0) for e in errors) == sum(f["reasons"].get("circuit_open", 0) for f in failed.values())

    shown = run_cli(data, "show", report["session_id"][:12], "--format", "md")
    assert shown.returncode == 0, shown.stderr
    # the answer's note, once, plainly: the local folder answered, the web providers were not reachable
    assert shown.stdout.count("Not reachable (no network?): ") == 1 and "Degraded mode" not in shown.stdout
    assert "this answer comes from local alone" in shown.stdout
    assert shown.stdout.count(reason) == 1  # the providers and why, once, in the metadata
