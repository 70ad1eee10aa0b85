"""Benchmark: the answer selection's CPU time a question with the answer reader on and off (issue 31's budget:
at most 0.5 CPU-s a question), over a small invented folder's worth of candidate sentences (40, the reader reading
the lexical ranker's best 16). Skipped, saying why, where the reader cannot run (no `semantic` extra or weights).
"""

from __future__ import annotations

import asyncio
import time

from research_tool.bench.results import BenchResult
from research_tool.engines.base import NumberedSource
from research_tool.engines.text.answering import select_answer
from research_tool.models.entities import SourceResult
from research_tool.providers.local_corpus.reader import ProcessReader, answer_reader

TARGET_CPU_S = 0.5
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


async def run_answer_reader() -> BenchResult:
    result = BenchResult(
        name="answer_reader",
        title="Answer selection CPU-s a question, the answer reader on and off (40 candidates, 16 read)",
        parameters={"questions": len(QUESTIONS), "candidates": 40, "read": 16},
    )
    reader = answer_reader()
    off = await asyncio.to_thread(_cpu_per_question, None)
    result.add("lexical ranker alone", round(off, 4), "CPU-s")
    if reader is None:
        result.skipped = "the answer reader cannot run here (the semantic extra or its weights are missing)"
        return result
    on = await asyncio.to_thread(_cpu_per_question, reader)
    result.add("with the answer reader", round(on, 4), "CPU-s", target=TARGET_CPU_S, comparison="<=")
    return result
