"""Benchmark: a first run with no network (issue 24). `research-tool run "..."` with the default providers, every web
provider's host unresolvable (`nonexistent.invalid`, so nothing leaves the machine) and the demo corpus indexed,
as a newcomer on a machine without network runs it: the wall time of the whole command (Python start-up
included; target <= 5 s), the session's own duration, and whether the report names each failed provider once and
cites the indexed folder.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from research_tool.bench.questions import QUESTIONS
from research_tool.bench.results import BenchResult
from research_tool.core.settings import PROVIDER_NAMES
from research_tool.demo_corpus import build_demo_corpus

UNRESOLVABLE_URL = "http://nonexistent.invalid"
WALL_TARGET_S = 5.0
FOREIGN_ENV = ("RESEARCH_", "OPENAI", "ANTHROPIC", "OLLAMA", "TAVILY", "EXA", "BRAVE")


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN_ENV)}
    env["RESEARCH_DATA_DIR"] = str(data_dir)
    for name in PROVIDER_NAMES:
        if name != "local":
            env[f"RESEARCH_{name.upper()}_BASE_URL"] = UNRESOLVABLE_URL
    return env


async def _cli(env: dict[str, str], *args: str) -> float:
    """Run `research-tool ARGS`; its wall time in seconds (raises when it fails)."""
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "research_tool", *args, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, stderr = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"research-tool {args[0]} exited {process.returncode}: {stderr.decode()[-500:]}")
    return time.perf_counter() - started


def _named_once(report: dict[str, Any]) -> bool:
    reason = str(report["metadata"].get("degraded_reason") or "")
    failed = [f["provider"] for f in report["metadata"].get("provider_failures") or []]
    return bool(failed) and all(reason.count(f"{name}:") == 1 for name in failed)


async def run_offline(workdir: Path, *, runs: int = 3) -> BenchResult:
    result = BenchResult(
        name="offline_run",
        title="A first run with no network: default providers unreachable, the demo corpus indexed",
        parameters={"runs": runs, "command": 'research-tool run "<question>" (defaults: standard tier, md)'},
    )
    started = time.perf_counter()
    corpus = workdir / "offline" / "demo_corpus"
    build_demo_corpus(corpus)
    walls: list[float] = []
    durations: list[float] = []
    named: list[bool] = []
    local_cited: list[bool] = []
    for i in range(runs):
        data = workdir / "offline" / f"data-{i}"
        env = _env(data)
        await _cli(env, "index", str(corpus))
        out = workdir / "offline" / f"report-{i}.json"
        question = QUESTIONS[i % len(QUESTIONS)]
        walls.append(await _cli(env, "run", question, "--format", "json", "--out", str(out)))
        report = json.loads(out.read_text(encoding="utf-8"))
        durations.append(float(report["metadata"]["duration_s"]))
        named.append(_named_once(report))
        local_cited.append(any(c.get("provider") == "local" for c in report["citations"]))
    result.add("run wall time, median", round(statistics.median(walls), 2), "s", target=WALL_TARGET_S,
               comparison="<=", note=f"max {max(walls):.2f} s; Python start-up included")  # fmt: skip
    result.add("session duration, median", round(statistics.median(durations), 2), "s")
    result.add("reports naming each failed provider once", sum(named), f"of {runs}", target=runs, comparison=">=")
    result.add("reports citing the indexed folder", sum(local_cited), f"of {runs}", target=runs, comparison=">=")
    result.details = {"walls_s": walls, "durations_s": durations}
    result.seconds = round(time.perf_counter() - started, 2)
    return result
