"""The fenced examples of README.md and docs/*.md, and how each one is marked.

A fence's info string says what the test does with the block (GitHub shows only the language):

- ```` ```sh example ```` (or ``python``): run by tests/docs/test_examples.py, in document order, from a
  scratch copy of the checkout (the Makefile and `.venv` linked in, its own `data/`), with `.venv/bin` first
  on PATH as after `. .venv/bin/activate`; it must exit 0.
- `server` as well: run while `research-tool serve` answers, with `localhost:8000` pointed at that server.
- `expect=TEXT` as well: TEXT must be in what the block prints (the answer the example promises).
- ```` ```js example ````: an ES module run by Node 20 beside tests/langgraph_js's pinned packages (the JS
  SDK); skipped, saying why, when node or those packages are absent.
- ```` ```sh not-run ````: not run here (it is the test suite itself, blocks the terminal, installs, or needs
  Docker, the evaluation data or the benchmark's minutes); said once, on purpose.

Every shell, Python or JavaScript block carries one of the two marks, so a new example cannot go untested by accident.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MARKED_LANGUAGES = frozenset({"sh", "bash", "shell", "console", "python", "py", "js", "javascript"})
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")


@dataclass(frozen=True)
class Example:
    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    marks: frozenset[str]
    expect: tuple[str, ...]
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def runs(self) -> bool:
        return "example" in self.marks

    @property
    def needs_server(self) -> bool:
        return "server" in self.marks

    @property
    def is_python(self) -> bool:
        return self.language in ("python", "py")

    @property
    def is_js(self) -> bool:
        return self.language in ("js", "javascript")


def documentation_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def fenced_blocks(path: Path) -> list[Example]:
    """Every fenced block of a Markdown file with its info string split into language and marks."""
    blocks: list[Example] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        words = opening["info"].split()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        marks = frozenset(w for w in words[1:] if "=" not in w)
        expect = tuple(w.split("=", 1)[1] for w in words[1:] if w.startswith("expect="))
        language = words[0] if words else ""
        blocks.append(Example(path, i + 1, language, marks, expect, "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def all_blocks() -> list[Example]:
    return [block for path in documentation_files() for block in fenced_blocks(path)]
