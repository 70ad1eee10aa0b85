"""The owndocs answer set: eighteen folders of everyday documents (`../shared/eval/owndocs/`), each written to its
own folder and indexed on its own, as a user indexes a folder and asks `research-tool run Q --providers local`.

Split **by folder** (questions of one folder share its files and names, so a half-folder split flatters): the
nine fit folders are the only ones a threshold or rule is chosen on (`eval.train_reader` trained on the first
four); the nine test folders are read for the tables. Each kind of document stands on both sides (markdown, html, plain
text, long prose).

Scoring (the folder README's suggestions): the first sentence answers when it holds the gold sentence (case and
whitespace aside) or, a pronoun resolved or markup cleaned, at least `SENTENCE_RECALL` of its words in order of
appearance; the short answer is right when it holds the gold short answer within eight words; yes/no questions by
the verdict; unanswerable ones by the report's `answered`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

# The first eight folders as before (the answer reader was trained on the first four), then the ten added later,
# five each side, each kind of document (markdown, html, plain text, API docs) on both.
FIT_FOLDERS = (
    "vennecliff-hotel",
    "gorsefly-docs",
    "varlowe-family-history",
    "fennimore-museum",
    "wrenhallow-dental",
    "marram-terrace-tenancy",
    "larkmoor-choir",
    "brackenford-bins",
    "hobnail-lane-bakery",
)
TEST_FOLDERS = (
    "harrowmere-buses",
    "kettlewick-oncall",
    "tansworth-gardeners",
    "fathomly-product",
    "corrowdale-vets",
    "spindlewick-cycles",
    "tarnholm-fells",
    "plotline-conference",
    "wrenbeam-api",
)
SENTENCE_RECALL = 0.8  # share of the gold sentence's words the first sentence must hold
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class OwnQuestion:
    id: str
    folder: str
    question: str
    kind: str  # the folder's kind (when, who, yes_no, how_to, ...) or "unanswerable"
    file: str = ""
    sentence: str = ""
    short: str | None = None


@dataclass(frozen=True)
class OwnFolder:
    name: str
    files: dict[str, str]
    questions: list[OwnQuestion]


def load_folders(owndocs: Path) -> list[OwnFolder]:
    """Every folder file of `owndocs`, in name order."""
    folders = []
    for path in sorted(owndocs.glob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        name = raw["name"]
        questions = [
            OwnQuestion(f"{name}/{i}", name, q["q"], q["kind"], q["file"], q["sentence"], q.get("short"))
            for i, q in enumerate(raw["questions"])
        ]
        questions += [OwnQuestion(f"{name}/u{i}", name, q, "unanswerable") for i, q in enumerate(raw["unanswerable"])]
        folders.append(OwnFolder(name, dict(raw["files"]), questions))
    return folders


def part_folders(part: str) -> tuple[str, ...]:
    if part == "fit":
        return FIT_FOLDERS
    if part == "test":
        return TEST_FOLDERS
    return FIT_FOLDERS + TEST_FOLDERS


def write_folder(folder: OwnFolder, root: Path) -> Path:
    """The folder's files under `root/<name>` (rewritten only when they differ), as a user keeps them."""
    target = root / folder.name
    for relative, text in folder.files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    return target


def words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def sentence_matches(said: str, gold: str) -> bool:
    """`said` states the gold sentence: holds it whole, or holds `SENTENCE_RECALL` of its words (a pronoun
    replaced by its name, markup or a footnote marker taken out)."""
    said_words, gold_words = words(said), words(gold)
    if not gold_words or not said_words:
        return False
    if " ".join(gold_words) in " ".join(said_words):
        return True
    pool = list(said_words)
    held = 0
    for w in gold_words:
        if w in pool:
            pool.remove(w)
            held += 1
    return held / len(gold_words) >= SENTENCE_RECALL
