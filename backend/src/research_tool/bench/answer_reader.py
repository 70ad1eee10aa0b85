"""Benchmark: the answer selection's CPU time a question with the answer reader on and off (issue 46's budget:
at most 0.24 CPU-s a question, the first reader's cost), over a small invented folder's worth of candidate
sentences (40, the reader reading the lexical ranker's best 16); then, with `server_sessions`, the scale
benchmark's server run twice at one small size (the Wikipedia replay, 0.1 s a request), the reader on and off:
sessions a minute and CPU-s a session of each. Skipped, saying why, where the reader cannot run (no `semantic`
extra or weights).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from research_tool.bench.results import BenchResult
from research_tool.engines.base import NumberedSource
from research_tool.engines.text.answering import select_answer
from research_tool.models.entities import SourceResult
from research_tool.providers.local_corpus.reader import READER_ENV, ProcessReader, answer_reader

TARGET_CPU_S = 0.24  # the first reader's cost a question (issue 46: a new reader may not cost more)
SERVER_DELAY_S = 0.1
QUESTIONS = (
    "When did the Kestrel Valley Railway open?",
    "How much does a child ticket cost?",
    "Who founded the railway society?",
    "How long is the line?",
)
PAGE = (
    "The Kestrel Valley Railway runs for nine miles from Pelham to the harbour at Saltwick. "
    "It was opened in 1887 by the Kestrel Valley Company to carry slate to the coast. "
    "The Kestrel Valley Railway Society was founded in 1968 by a group of volunteers led by Ada Marsh. "
    "An adult return ticket costs £14, and a child ticket costs £7. "
    "Volunteers work as drivers, guards and signal staff on every running day. "
    "The Crane Beck viaduct is 84 metres long and carries the line over the river. "
    "Trains run every weekend from April to October and daily in August. "
    "Dogs are welcome on every train, but not in the café. "
    "The shop sells books, maps and models of the railway's engines. "
    "There is no lift at Kestrel Halt, and the footbridge has 32 steps. "
)


def _sources() -> list[NumberedSource]:
    return [
        NumberedSource(
            n=i,
            source=SourceResult(
                url=f"file:///railway/{i}.md",
                title=f"Kestrel Valley Railway part {i}",
                source_name="local",
                full_content=PAGE,
            ),
        )
        for i in range(1, 5)
    ]


def _cpu_per_question(reader: ProcessReader | None, rounds: int = 3) -> float:
    sources = _sources()
    select_answer(QUESTIONS[0], sources, reader=reader)  # builds and loads the graph once
    started = time.process_time()
    for _ in range(rounds):
        for question in QUESTIONS:
            select_answer(question, sources, reader=reader)
    return (time.process_time() - started) / (rounds * len(QUESTIONS))


async def run_answer_reader(workdir: Path | None = None, server_sessions: int = 0) -> BenchResult:
    result = BenchResult(
        name="answer_reader",
        title="Answer selection CPU-s a question, the answer reader on and off (40 candidates, 16 read)",
        parameters={
            "questions": len(QUESTIONS),
            "candidates": 40,
            "read": 16,
            "server_sessions": server_sessions,
            "server_replay_delay_s": SERVER_DELAY_S,
        },
    )
    reader = answer_reader()
    off = await asyncio.to_thread(_cpu_per_question, None)
    result.add("lexical ranker alone", round(off, 4), "CPU-s")
    if reader is None:
        result.skipped = "the answer reader cannot run here (the semantic extra or its weights are missing)"
        return result
    on = await asyncio.to_thread(_cpu_per_question, reader)
    result.add("with the answer reader", round(on, 4), "CPU-s", target=TARGET_CPU_S, comparison="<=")
    if workdir is not None and server_sessions > 0:
        await _server_pair(result, workdir, server_sessions)
    return result


async def _server_pair(result: BenchResult, workdir: Path, n: int) -> None:
    """The scale benchmark's server at one size, the reader on, then off (RESEARCH_ANSWER_READER=0)."""
    from research_tool.bench.scale import run_size

    rows = {}
    for mode, env in (("on", {}), ("off", {READER_ENV: "0"})):
        rows[mode] = await run_size(
            n, SERVER_DELAY_S, workdir, max_iterations=2, server_env=env, label=f"answer-reader-{mode}-{n}"
        )
        row = rows[mode]
        result.add(
            f"server ({n} session{'s' if n != 1 else ''} at once), reader {mode}: sessions a minute",
            row["sessions_per_min"],
            "/min",
            note=f"{row['cpu_s_per_session']} CPU-s a session (server + workers), CPU bound "
            f"{row['cpu_bound_per_min']}/min; {row['completed']} of {n} completed",
        )
    result.details["server_runs"] = rows
