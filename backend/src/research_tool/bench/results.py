"""What a benchmark reports: figures (with their target, when the issue sets one), printed as a table
and saved as JSON with the machine they were measured on."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Comparison = Literal["<=", ">=", "=="]


class Figure(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    value: float | int | str | None
    unit: str = ""
    target: float | int | None = None
    comparison: Comparison | None = None
    note: str = ""

    @property
    def met(self) -> bool | None:
        if self.target is None or self.comparison is None or not isinstance(self.value, int | float):
            return None
        if self.comparison == "<=":
            return self.value <= self.target
        if self.comparison == ">=":
            return self.value >= self.target
        return self.value == self.target

    def as_json(self) -> dict[str, Any]:
        return {**self.model_dump(), "met": self.met}


class BenchResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    title: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    figures: list[Figure] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)
    skipped: str | None = None
    seconds: float = 0.0

    def figure(self, name: str) -> Figure:
        for figure in self.figures:
            if figure.name == name:
                return figure
        raise KeyError(name)

    def add(self, name: str, value: float | int | str | None, unit: str = "", **extra: Any) -> None:
        self.figures.append(Figure(name=name, value=value, unit=unit, **extra))

    def as_json(self) -> dict[str, Any]:
        return {**self.model_dump(exclude={"figures"}), "figures": [f.as_json() for f in self.figures]}


def machine() -> dict[str, Any]:
    """The machine the figures were measured on."""
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory_gb = None
    with contextlib.suppress(ValueError, OSError):
        memory_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gb": memory_gb,
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
    }


def _format_value(figure: Figure) -> str:
    value = figure.value
    if value is None:
        return "n/a"
    text = str(value) if not isinstance(value, float) else f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return f"{text} {figure.unit}".strip()


def _format_target(figure: Figure) -> str:
    if figure.target is None or figure.comparison is None:
        return ""
    verdict = {True: "met", False: "MISSED", None: "n/a"}[figure.met]
    return f"{figure.comparison} {figure.target} {figure.unit}".strip() + f"  {verdict}"


def render_table(results: list[BenchResult]) -> str:
    rows: list[tuple[str, str, str]] = []
    lines: list[str] = []
    for result in results:
        if result.skipped:
            rows.append((f"[{result.name}] skipped", result.skipped, ""))
            continue
        for figure in result.figures:
            rows.append((f"[{result.name}] {figure.name}", _format_value(figure), _format_target(figure)))
    width = [max([len(r[i]) for r in rows] + [6]) for i in range(3)]
    header = ("figure", "value", "target")
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, width, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in width))
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, width, strict=True)).rstrip())
    return "\n".join(lines)


def save_results(results: list[BenchResult], data_dir: Path, argv: list[str]) -> Path:
    folder = data_dir / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = folder / f"results-{stamp}.json"
    document = {
        "created_at": datetime.now(UTC).isoformat(),
        "machine": machine(),
        "argv": argv,
        "results": [r.as_json() for r in results],
    }
    path.write_text(json.dumps(document, indent=2, default=str), encoding="utf-8")
    return path
