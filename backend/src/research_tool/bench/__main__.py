"""`python -m research_tool.bench` (`make bench`): run the benchmarks, print a table, save JSON under the
data dir (`<RESEARCH_DATA_DIR>/bench/results-<timestamp>.json`).

    python -m research_tool.bench                      # all seven, default sizes
    python -m research_tool.bench --only scale         # 100 x 0.1 s, 300 x 1.0 s, 1,000 x 1.0 s (~12 min)
    python -m research_tool.bench --only scale --sizes 100,300 --delays 0.1,1.0   # every size at every delay
    python -m research_tool.bench --quick              # every benchmark at its smallest size
    python -m research_tool.bench --only documents     # office files, sheets, e-books, mail, OCR (~1 min)
    python -m research_tool.bench --only cluster       # API node + 1/2/4 workers on Postgres (~6 min; skipped
                                                       # with the reason when Postgres is not reachable)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from research_tool.bench.answer_reader import run_answer_reader
from research_tool.bench.cluster import QUICK_CLUSTER, ClusterSizes, run_cluster
from research_tool.bench.documents import run_documents
from research_tool.bench.langgraph_protocol import run_langgraph
from research_tool.bench.local_index import run_local_index
from research_tool.bench.model_hang import run_model_hang
from research_tool.bench.offline_run import run_offline
from research_tool.bench.overhead import run_overhead
from research_tool.bench.rate_limits import run_rate_limits
from research_tool.bench.results import BenchResult, machine, render_table, save_results
from research_tool.bench.resume import run_resume
from research_tool.bench.scale import DEFAULT_RUNS, run_scale
from research_tool.bench.splitter import run_splitter
from research_tool.bench.storage import run_storage
from research_tool.bench.tracing import run_tracing
from research_tool.core.logging import configure_logging
from research_tool.core.settings import Settings

BENCHMARKS = (
    "overhead",
    "scale",
    "rate_limits",
    "resume",
    "local_index",
    "splitter",
    "model_hang",
    "storage",
    "offline_run",
    "cluster",
    "langgraph",
    "tracing",
    "answer_reader",
    "documents",
)


@dataclass(frozen=True)
class Sizes:
    overhead_sessions: int = 3
    overhead_max_iterations: int | None = None  # the standard tier's own (5); sessions saturate earlier
    overhead_warmup: int = 1
    scale_runs: tuple[tuple[int, float], ...] = DEFAULT_RUNS  # (sessions, replay delay s)
    scale_max_iterations: int = 2
    rate_limit_sessions: int = 3
    rate_limit_max_iterations: int = 2
    rate_limit_rates: tuple[float, float] = (1.0, 10.0)
    resume_sessions: int = 20
    resume_max_iterations: int = 3
    splitter_sizes: tuple[int, ...] = (10_000, 100_000, 1_000_000, 5_000_000)
    model_hang_limit_s: float = 20.0
    storage_sessions: int = 100
    storage_rss_sessions: int = 1000
    storage_demo_sessions: int = 8  # one per how-to question
    offline_runs: int = 3
    scifact_dir: Path | None = None
    profile_dir: Path | None = None  # scale: record the server with py-spy
    cluster: ClusterSizes = field(default_factory=ClusterSizes)
    langgraph_sessions: int = 5
    langgraph_streams: int = 100
    tracing_sessions: int = 8
    tracing_rounds: int = 3
    document_copies: int = 20  # of each of 9 kinds
    document_ocr_pages: int = 3
    reader_server_sessions: int = 100  # answer_reader: the server run with the reader on and off at this size


QUICK = Sizes(
    overhead_sessions=1,
    overhead_max_iterations=1,
    overhead_warmup=0,
    scale_runs=((2, 0.1),),
    scale_max_iterations=1,
    rate_limit_sessions=2,
    rate_limit_max_iterations=1,
    rate_limit_rates=(5.0, 20.0),
    resume_sessions=2,
    resume_max_iterations=2,
    splitter_sizes=(10_000, 100_000),
    model_hang_limit_s=4.0,
    storage_sessions=4,
    storage_rss_sessions=40,
    storage_demo_sessions=2,
    offline_runs=1,
    cluster=QUICK_CLUSTER,
    langgraph_sessions=1,
    langgraph_streams=5,
    tracing_sessions=2,
    tracing_rounds=1,
    document_copies=2,
    document_ocr_pages=1,
    reader_server_sessions=2,
)


def runners(sizes: Sizes, workdir: Path) -> dict[str, Callable[[], Awaitable[BenchResult]]]:
    return {
        "overhead": lambda: run_overhead(
            workdir,
            sessions=sizes.overhead_sessions,
            max_iterations=sizes.overhead_max_iterations,
            warmup=sizes.overhead_warmup,
        ),
        "scale": lambda: run_scale(
            workdir, runs=sizes.scale_runs, max_iterations=sizes.scale_max_iterations, profile_dir=sizes.profile_dir
        ),
        "rate_limits": lambda: run_rate_limits(
            workdir,
            sessions=sizes.rate_limit_sessions,
            max_iterations=sizes.rate_limit_max_iterations,
            rates=sizes.rate_limit_rates,
        ),
        "resume": lambda: run_resume(
            workdir, sessions=sizes.resume_sessions, max_iterations=sizes.resume_max_iterations
        ),
        "local_index": lambda: run_local_index(sizes.scifact_dir),
        "documents": lambda: run_documents(sizes.document_copies, sizes.document_ocr_pages),
        "splitter": lambda: run_splitter(sizes.splitter_sizes),
        "answer_reader": lambda: run_answer_reader(workdir, server_sessions=sizes.reader_server_sessions),
        "model_hang": lambda: run_model_hang(workdir, time_limit_s=sizes.model_hang_limit_s),
        "storage": lambda: run_storage(
            workdir,
            sessions=sizes.storage_sessions,
            rss_sessions=sizes.storage_rss_sessions,
            rss_step=max(1, sizes.storage_rss_sessions // 20),
            demo_sessions=sizes.storage_demo_sessions,
        ),
        "offline_run": lambda: run_offline(workdir, runs=sizes.offline_runs),
        "cluster": lambda: run_cluster(workdir, sizes.cluster),
        "langgraph": lambda: run_langgraph(workdir, sessions=sizes.langgraph_sessions, streams=sizes.langgraph_streams),
        "tracing": lambda: run_tracing(workdir, sessions=sizes.tracing_sessions, rounds=sizes.tracing_rounds),
    }


async def run_benchmarks(names: list[str], sizes: Sizes, *, echo: Callable[[str], None]) -> list[BenchResult]:
    """Run the named benchmarks one after another (each alone on the machine); a benchmark that breaks
    is reported as such and the others still run."""
    results = []
    with tempfile.TemporaryDirectory(prefix="research-bench-") as tmp:
        table = runners(sizes, Path(tmp))
        for name in names:
            echo(f"running {name} ...")
            started = time.perf_counter()
            try:
                result = await table[name]()
            except Exception as exc:
                result = BenchResult(name=name, title=name, skipped=f"FAILED: {type(exc).__name__}: {exc}")
            result.seconds = result.seconds or round(time.perf_counter() - started, 2)
            echo(render_table([result]) + f"\n({name}: {result.seconds:.0f} s)\n")
            results.append(result)
    return results


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m research_tool.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=BENCHMARKS, help="run only this benchmark (repeatable)")
    parser.add_argument("--quick", action="store_true", help="every benchmark at its smallest size")
    parser.add_argument(
        "--sizes", help="scale: comma-separated session counts (default: 100 x 0.1 s, 300 and 1000 x 1 s)"
    )
    parser.add_argument("--delays", help="scale: comma-separated replay delays in seconds, each run at every size")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="scale: record the server with py-spy into DIR (collapsed stacks per size)",
    )
    parser.add_argument("--data-dir", type=Path, help="where results are saved (default: RESEARCH_DATA_DIR)")
    return parser.parse_args(argv)


def _numbers(text: str | None, kind: type[int] | type[float]) -> list[Any]:
    return [kind(part) for part in (text or "").split(",") if part.strip()]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging("console", "WARNING")
    sizes = QUICK if args.quick else Sizes()
    if args.sizes or args.delays:
        counts = _numbers(args.sizes, int) or sorted({n for n, _ in sizes.scale_runs})
        delays = _numbers(args.delays, float) or sorted({d for _, d in sizes.scale_runs})
        sizes = Sizes(**{**sizes.__dict__, "scale_runs": tuple((n, d) for d in delays for n in counts)})
    if args.profile:
        sizes = Sizes(**{**sizes.__dict__, "profile_dir": args.profile.resolve()})
    names = args.only or list(BENCHMARKS)
    data_dir = args.data_dir or Settings().data_dir

    def echo(text: str) -> None:
        print(text, flush=True)

    info = machine()
    echo(
        f"Research Tool benchmarks on {info['cpu']}, {info['cores']} cores, {info['memory_gb']} GB, "
        f"Python {info['python']}"
    )
    started = time.perf_counter()
    results = asyncio.run(run_benchmarks(names, sizes, echo=echo))
    echo("Summary")
    echo(render_table(results))
    path = save_results(results, data_dir, sys.argv if argv is None else argv)
    echo(f"\nsaved {path} ({time.perf_counter() - started:.0f} s in all)")
    missed = [f"{r.name}: {f.name}" for r in results for f in r.figures if f.met is False]
    if missed:
        echo("targets missed: " + "; ".join(missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
