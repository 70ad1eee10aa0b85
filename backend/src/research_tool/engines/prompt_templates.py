"""Prompt files (`engines/prompts/<step>.txt`) and the delimiting of retrieved text inside them.

A prompt file has two parts separated by a line `=== INPUT ===`: above it the instructions (sent as the
system message: what the model gets, what it must do, the exact JSON to answer with), below it the input
template (sent as the user message). Placeholders are `$name` (`string.Template`) in either part, so the
JSON examples' braces need no escaping. Every system message starts with `Research Tool step: <step>.` so logs (and the
scripted test servers) can tell the steps apart.

Retrieved text is data, never instructions: it goes in `<source id="n" …>…</source>` blocks whose content
cannot close the block early, and every prompt that carries such blocks says so.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template

from research_tool.core.errors import EngineError

INPUT_MARKER = "=== INPUT ==="
STEP_LINE = "Research Tool step: {step}."


@dataclass(frozen=True)
class RenderedPrompt:
    step: str
    system: str
    user: str


@dataclass(frozen=True)
class PromptTemplate:
    step: str
    instructions: Template
    input_template: Template

    def render(self, **values: object) -> RenderedPrompt:
        mapping = {k: str(v) for k, v in values.items()}
        try:
            instructions = self.instructions.substitute(mapping)
            user = self.input_template.substitute(mapping)
        except (KeyError, ValueError) as exc:
            raise EngineError(f"prompt {self.step}.txt: missing or bad placeholder ({exc})") from exc
        system = f"{STEP_LINE.format(step=self.step)}\n{instructions}"
        return RenderedPrompt(step=self.step, system=system, user=user)


@cache
def load_prompt(step: str) -> PromptTemplate:
    """Read `engines/prompts/<step>.txt` (packaged with the wheel)."""
    path = resources.files("research_tool.engines").joinpath("prompts", f"{step}.txt")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise EngineError(f"prompt file {step}.txt is missing from engines/prompts") from exc
    instructions, marker, template = text.partition(f"\n{INPUT_MARKER}\n")
    if not marker:
        raise EngineError(f"prompt file {step}.txt has no '{INPUT_MARKER}' line")
    return PromptTemplate(
        step=step, instructions=Template(instructions.strip()), input_template=Template(template.strip())
    )


def _escape_attribute(value: str) -> str:
    return html.escape(" ".join(value.split()), quote=True)


_DELIMITER = re.compile(r"<(/?)(source|claim|facts|sources|entities|question)\b", re.IGNORECASE)


def escape_data(text: str) -> str:
    """Neutralize anything in retrieved text that could pass for our delimiters (any case, opening or
    closing): data can never end its own fence early or open a new one."""
    return _DELIMITER.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}", text)


def truncate(text: str, max_chars: int) -> str:
    text = text.strip()
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars * 0.8 else cut) + " …"


def source_block(source_id: int | str, text: str, *, title: str = "", url: str = "", max_chars: int = 4000) -> str:
    """`<source id="3" title="…" url="…">text</source>`: retrieved text as delimited data."""
    attributes = f'id="{_escape_attribute(str(source_id))}"'
    if title:
        attributes += f' title="{_escape_attribute(title)}"'
    if url:
        attributes += f' url="{_escape_attribute(url)}"'
    body = escape_data(truncate(text, max_chars)) or "(no text)"
    return f"<source {attributes}>\n{body}\n</source>"
