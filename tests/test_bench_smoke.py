"""make bench at its smallest size: every benchmark runs end to end (replay servers, a uvicorn
subprocess, a SIGKILL and a restart, a tiny SciFact-shaped corpus) and reports its figures. No timing
is asserted: benchmarks are not timed tests."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from research_tool.bench.__main__ import BENCHMARKS, QUICK, Sizes, run_benchmarks
from research_tool.bench.results import render_table, save_results

pytestmark = pytest.mark.slow

# the cluster benchmark needs Postgres and starts processes of its own: tests/test_bench_cluster.py; the
# documents benchmark needs the `documents` extra (make venv installs it) and is left out without it
SINGLE_PROCESS = [
    name
    for name in BENCHMARKS
    if name != "cluster" and (name != "documents" or importlib.util.find_spec("docx") is not None)
]
SMOKE_STREAMS = 2

EXPECTED_FIGURES = {
    "overhead": ["wall / lower bound (all sessions)", "lower bound (mean)", "sessions completed"],
    "scale": [
        "2 x 0.1s: start POST p95",
        "2 x 0.1s: failed starts",
        "2 x 0.1s: status p95",
        "2 x 0.1s: /healthz p95",
        "2 x 0.1s: event lag p95",
        "2 x 0.1s: sessions on the time guard",
        "2 x 0.1s: sessions per minute",
        "2 x 0.1s: peak RSS (server + workers)",
        "2 x 0.1s: completed with a report",
        "2 x 0.1s: checkpoint bytes per session",
        "2 x 0.1s: sessions lost",
    ],
    "rate_limits": [
        "semantic_scholar (5/s): minimum spacing",
        "semantic_scholar (5/s): violations",
        "wikipedia (20/s): utilisation while requests pending",
        "sessions completed",
    ],
    "resume": [
        "start to every session's first new event",
        "sessions that never resumed",
        "sessions lost (not completed, or a gap in events)",
    ],
    "local_index": ["index time", "query latency top-10 p50", "query latency top-10 p95"],
    "splitter": ["split 10 KB", "split 100 KB", "seconds per MB at the largest size"],
    "answer_reader": [
        "lexical ranker alone",
        "with the answer reader",
        "server (1 session at once), reader on: sessions a minute",
        "server (1 session at once), reader off: sessions a minute",
    ],
    "documents": ["indexing speed, 9 kinds mixed", "index again, unchanged"],
    "model_hang": ["session wall time", "provider calls (search done)", "degraded_mode", "model fallbacks"],
    "storage": [
        "checkpoint bytes per completed session",
        "data dir after deleting / empty",
        "demo corpus: checkpoints + events + page text per standard session",
        "RSS growth per finished session (second half)",
        "Python heap growth per finished session (second half)",
    ],
    "langgraph": ["runs.wait / start median", f"event lag p95 ({SMOKE_STREAMS} streams)"],
    "offline_run": [
        "run wall time, median",
        "reports naming each failed provider once",
        "reports citing the indexed folder",
    ],
    "tracing": [
        "sessions per minute, tracing off (median)",
        "sessions per minute, tracing on (median)",
        "on / off",
        "spans per session (tracing on)",
        "sessions completed",
    ],
}


def tiny_scifact(folder: Path) -> Path:
    docs = [
        ("d1", "Aspirin and heart attacks", "Daily aspirin lowers the risk of a first heart attack in adults."),
        ("d2", "Vitamin D and bones", "Vitamin D supplements improve bone density in older women."),
        ("d3", "Sleep and memory", "Sleep after learning consolidates memory in young adults."),
    ]
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in docs), encoding="utf-8"
    )
    queries = [("q1", "aspirin reduces heart attack risk"), ("q2", "vitamin D improves bone density")]
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries), encoding="utf-8"
    )
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n", encoding="utf-8")
    return folder


async def test_every_benchmark_runs_at_its_smallest_size_and_reports_its_figures(tmp_path: Path) -> None:
    # Smaller than --quick where a count only sizes a figure: storage's memory half runs 3 sessions, each followed
    # by a probe (the second-half slopes still get three points; --quick runs 40 under tracemalloc), its disk half
    # 2 and its demo-corpus half 1 (per-session figures, whatever the count); langgraph follows 2 concurrent SDK
    # streams, not 5. No figure's size is asserted here, only that each is there.
    smoke = {
        "scifact_dir": tiny_scifact(tmp_path / "scifact"),
        "storage_sessions": 2,
        "storage_demo_sessions": 1,
        "storage_rss_sessions": 3,
        "langgraph_streams": SMOKE_STREAMS,
        "tracing_sessions": 1,
        "reader_server_sessions": 1,
    }
    sizes = Sizes(**{**QUICK.__dict__, **smoke})
    lines: list[str] = []
    results = await run_benchmarks(SINGLE_PROCESS, sizes, echo=lines.append)

    assert [r.name for r in results] == SINGLE_PROCESS
    for result in results:
        assert result.skipped is None, f"{result.name}: {result.skipped}"
        names = [f.name for f in result.figures]
        for expected in EXPECTED_FIGURES[result.name]:
            assert expected in names, f"{result.name} lacks {expected!r}: {names}"
            assert result.figure(expected).value is not None, f"{result.name}: {expected} has no value"
    assert results[0].figure("sessions completed").value == 1
    assert results[1].figure("2 x 0.1s: sessions lost").value == 0
    assert results[1].figure("2 x 0.1s: failed starts").value == 0
    assert results[1].figure("2 x 0.1s: completed with a report").value == 2
    assert results[3].figure("sessions that never resumed").value == 0
    assert results[4].figure("documents indexed").value == 3
    assert results[6].figure("status").value == "completed"
    assert results[7].figure("checkpoint bytes per completed session").met  # <= 300 KB: page text is not in it
    assert results[7].figure("data dir after deleting / empty").met  # deleting gives the space back
    assert results[7].figure("demo corpus: checkpoints + events + page text per standard session").met  # <= 300 KB
    assert results[8].figure("reports naming each failed provider once").met
    assert results[8].figure("reports citing the indexed folder").met
    tracing = next(r for r in results if r.name == "tracing")
    assert tracing.figure("sessions completed").met
    assert float(tracing.figure("spans per session (tracing on)").value or 0) > 10  # the sink received the trace

    table = render_table(results)
    assert "[scale] 2 x 0.1s: status p95" in table and "[resume]" in table
    saved = json.loads(save_results(results, tmp_path / "data", ["--quick"]).read_text())
    assert saved["machine"]["cores"] and len(saved["results"]) == len(SINGLE_PROCESS)
    assert {f["name"] for f in saved["results"][2]["figures"]} >= set(EXPECTED_FIGURES["rate_limits"])


async def test_a_missing_scifact_folder_is_skipped_with_a_reason(tmp_path: Path) -> None:
    results = await run_benchmarks(["local_index"], Sizes(scifact_dir=tmp_path / "absent"), echo=lambda _: None)
    assert results[0].skipped and "SciFact not found" in results[0].skipped and not results[0].figures
