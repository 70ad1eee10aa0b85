"""The `make run` demo corpus: the standard library's own documentation, the docstrings pydoc shows.

Every machine with Python has these docstrings, so the demo needs no download and the repository
carries no third-party prose. One plain-text document per module (its description and an index of
its classes and functions), one per public class or function, and one per public method, so a
question such as "run a subprocess with a timeout and capture its output" finds `subprocess.run`,
`subprocess.Popen.communicate` and `subprocess.TimeoutExpired` as separate, citable documents.

    python -m research_tool.demo_corpus DIR

builds DIR once (into a sibling folder, then renamed, so an interrupted build leaves nothing
half-made) and is a quick no-op when DIR already holds this version's corpus.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import shutil
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from research_tool.core.errors import BadInputError
from research_tool.core.logging import get_logger

log = get_logger(__name__)

CORPUS_VERSION = 3  # 3: signatures without memory addresses
MARKER_FILE = ".demo_corpus.json"

# Modules behind everyday Python questions: processes, files, text, data formats, dates,
# concurrency, networking, testing, typing. Each is imported only to read its docstrings.
DEMO_MODULES: tuple[str, ...] = (
    "subprocess", "shlex", "signal", "os", "os.path", "sys", "platform", "pathlib", "shutil", "tempfile",
    "glob", "fnmatch", "io", "json", "csv", "configparser", "tomllib", "pickle", "sqlite3", "zipfile",
    "tarfile", "gzip", "hashlib", "base64", "uuid", "secrets", "random", "re", "string", "textwrap",
    "difflib", "datetime", "time", "calendar", "zoneinfo", "math", "statistics", "decimal", "fractions",
    "logging", "warnings", "traceback", "argparse", "getpass", "asyncio", "threading", "queue",
    "concurrent.futures", "multiprocessing", "contextlib", "functools", "itertools", "operator",
    "collections", "heapq", "bisect", "enum", "dataclasses", "typing", "abc", "copy", "inspect",
    "weakref", "unittest", "timeit", "urllib.parse", "urllib.request", "http.client", "http.server",
    "socket", "selectors", "email.message", "html", "xml.etree.ElementTree", "pprint", "struct", "array",
)  # fmt: skip


@dataclass(frozen=True)
class DemoDocument:
    name: str  # qualified name, also the file stem: "subprocess.run"
    title: str  # "subprocess.run — Run command with arguments and return a CompletedProcess instance."
    body: str


# --- docstring text ----------------------------------------------------------------------------

_LIST_OR_CODE = re.compile(r"^\s*(?:[-*+•]\s|\d+[.)]\s|>>>|\.\.\.|[=\-~^]{3,}\s*$)")


def reflow(doc: str) -> str:
    """Join the hard-wrapped lines of prose paragraphs; leave lists, tables, code and headings alone."""
    paragraphs = re.split(r"\n\s*\n", doc.strip())
    out: list[str] = []
    for paragraph in paragraphs:
        lines = paragraph.splitlines()
        prose = all(not line.startswith((" ", "\t")) and not _LIST_OR_CODE.match(line) for line in lines)
        out.append(" ".join(line.strip() for line in lines) if prose and len(lines) > 1 else paragraph)
    return "\n\n".join(out)


def first_sentence(doc: str, *, max_chars: int = 120) -> str:
    """The docstring's opening sentence (its synopsis), on one line."""
    first_paragraph = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0] if doc.strip() else ""
    text = re.sub(r"\s+", " ", first_paragraph).strip()
    match = re.match(r"(.+?[.!?])(?:\s|$)", text)
    sentence = match.group(1) if match else text
    return sentence if len(sentence) <= max_chars else sentence[: max_chars - 1].rstrip() + "…"


_ADDRESS_RE = re.compile(r" at 0x[0-9a-fA-F]+(?=>)")


def _signature(name: str, obj: object) -> str:
    """`name(args)` as inspect gives it, without the memory addresses of default values ("<function copy2 at
    0x7f...>" reads "<function copy2>"): they change every run and mean nothing to a reader."""
    try:
        return _ADDRESS_RE.sub("", f"{name}{inspect.signature(obj)}")  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return f"{name}(...)"


def _title(qualname: str, doc: str) -> str:
    synopsis = first_sentence(doc)
    return f"{qualname} — {synopsis}" if synopsis else qualname


# --- what a module documents ---------------------------------------------------------------------


def _public_members(module: ModuleType) -> list[tuple[str, object]]:
    """Public classes and functions: `__all__` when the module has one, else those defined in it."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if getattr(v, "__module__", None) == module.__name__]
    members: list[tuple[str, object]] = []
    for name in sorted(set(names)):
        if name.startswith("_"):
            continue
        obj = getattr(module, name, None)
        if obj is None or not (inspect.isclass(obj) or inspect.isroutine(obj)):
            continue
        members.append((name, obj))
    return members


def _public_methods(cls: type) -> list[tuple[str, object]]:
    """Public methods and properties the class itself defines (inherited ones have their own page)."""
    methods: list[tuple[str, object]] = []
    for name, raw in sorted(vars(cls).items()):
        if name.startswith("_"):
            continue
        if isinstance(raw, property) or inspect.isroutine(raw) or isinstance(raw, (classmethod, staticmethod)):
            methods.append((name, getattr(cls, name, raw)))
    return methods


def _doc(obj: object) -> str:
    """The object's own docstring, cleaned as pydoc shows it.

    Not inherited (inspect.getdoc would copy a base class's text onto every override, and the same
    sentence in many documents looks like independent agreement to the research engine), and no
    fallback to source comments (pydoc.getdoc's, which parses every module's source: seconds)."""
    doc = getattr(obj, "__doc__", None)
    return inspect.cleandoc(doc).strip() if isinstance(doc, str) else ""


def _names_line(label: str, names: Sequence[str]) -> list[str]:
    """A plain list of names (no sentence: an index, not a claim a reader would cite)."""
    return ["", f"{label}: {', '.join(names)}"] if names else []


def module_documents(module_name: str) -> list[DemoDocument]:
    """The documents of one module: an overview, then its classes, functions and methods."""
    module = importlib.import_module(module_name)
    module_doc = _doc(module)
    documents: list[DemoDocument] = []
    classes: list[str] = []
    functions: list[str] = []
    for name, obj in _public_members(module):
        doc = _doc(obj)  # may be empty (csv.DictReader): the signature still says something
        qualname = f"{module_name}.{name}"
        (classes if inspect.isclass(obj) else functions).append(name)
        body = [_signature(qualname, obj)]
        if doc:
            body += ["", reflow(doc)]
        if inspect.isclass(obj):
            methods = [(m, o, _doc(o)) for m, o in _public_methods(obj)]
            body += _names_line(f"Methods and attributes of {qualname}", [m for m, _, _ in methods])
            for method_name, method, method_doc in methods:
                if not method_doc:
                    continue
                method_qualname = f"{qualname}.{method_name}"
                is_property = isinstance(inspect.getattr_static(obj, method_name), property)
                head = f"{method_qualname} (property)" if is_property else _signature(method_qualname, method)
                documents.append(
                    DemoDocument(
                        name=method_qualname,
                        title=_title(method_qualname, method_doc),
                        body=f"{head}\n\n{reflow(method_doc)}",
                    )
                )
        documents.append(DemoDocument(name=qualname, title=_title(qualname, doc), body="\n".join(body)))
    overview = [reflow(module_doc) if module_doc else f"The {module_name} module."]
    overview += _names_line(f"Classes in {module_name}", classes)
    overview += _names_line(f"Functions in {module_name}", functions)
    documents.append(DemoDocument(name=module_name, title=_title(module_name, module_doc), body="\n".join(overview)))
    return documents


def iter_demo_documents(modules: Sequence[str] = DEMO_MODULES) -> Iterator[DemoDocument]:
    """Every module's documents; a module this Python lacks (no sqlite3, say) is skipped."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated names raise warnings when merely looked up
        for module_name in modules:
            try:
                yield from module_documents(module_name)
            except ImportError as exc:
                log.info("demo_module_skipped", module=module_name, error=str(exc))


# --- writing the folder --------------------------------------------------------------------------


def _marker(modules: Sequence[str]) -> dict[str, object]:
    return {
        "version": CORPUS_VERSION,
        "python": sys.version.split()[0],
        "modules": list(modules),
    }


def is_built(directory: Path, modules: Sequence[str] = DEMO_MODULES) -> bool:
    try:
        marker = json.loads((directory / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and {k: marker.get(k) for k in _marker(modules)} == _marker(modules)


def _file_name(name: str, taken: set[str]) -> str:
    stem = re.sub(r"[^\w.\-]", "_", name)
    candidate, n = stem, 1
    while candidate.casefold() in taken:  # case-insensitive file systems
        n += 1
        candidate = f"{stem}-{n}"
    taken.add(candidate.casefold())
    return f"{candidate}.txt"


def write_corpus(target: Path, modules: Sequence[str] = DEMO_MODULES) -> int:
    """Write the documents and the marker into `target` (an empty or new folder); returns the count."""
    target.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    count = 0
    for document in iter_demo_documents(modules):
        path = target / _file_name(document.name, taken)
        path.write_text(f"{document.title}\n\n{document.body.strip()}\n", encoding="utf-8")
        count += 1
    marker = _marker(modules) | {"documents": count}
    (target / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    return count


def build_demo_corpus(directory: Path | str, modules: Sequence[str] = DEMO_MODULES) -> int | None:
    """Build the corpus in `directory` unless it is already there. Returns the document count, or None
    when nothing had to be done. Refuses to replace a folder that is not a demo corpus."""
    target = Path(directory)
    if is_built(target, modules):
        return None
    if target.exists() and any(target.iterdir()) and not (target / MARKER_FILE).exists():
        raise BadInputError(f"{target} exists and is not a demo corpus; choose an empty or new folder")
    staging = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        count = write_corpus(staging, modules)
        if target.exists():  # an older version of the demo corpus (it has the marker)
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            target.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return count


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m research_tool.demo_corpus DIR", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        count = build_demo_corpus(Path(args[0]))
    except BadInputError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    if count is not None:
        elapsed = time.perf_counter() - started
        print(
            f"demo corpus: {count} documents from the standard library's docs in {args[0]} ({elapsed:.1f} s)",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
