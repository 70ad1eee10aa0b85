"""`research-tool`: run, resume and inspect research sessions from a terminal (DESIGN §6).

Exit codes: 0 done, 2 bad input, 3 failed, 130 interrupted (the session stays resumable).
Progress goes to stderr (one live line on a terminal, the event log with --verbose); the report (or JSON)
to stdout or --out, rendered as rich markdown on a terminal and left as plain markdown in a pipe.

Start-up is kept short: `sessions`, `show` and the other light commands import neither the graph nor
LangChain nor trafilatura (they are imported inside the commands that run research).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from rich.console import Console
from rich.text import Text

from research_tool.core.process_clock import process_started
from research_tool.models.domain import DOMAIN_NAMES
from research_tool.models.request import SEARCH_PROVIDERS
from research_tool.models.stop_reasons import stop_short_label
from research_tool.models.tiers import TIER_NAMES

if TYPE_CHECKING:
    from pydantic import ValidationError
    from rich.status import Status

    from research_tool.core.settings import Settings
    from research_tool.models.events import Event
    from research_tool.models.request import ResearchRequest
    from research_tool.models.sessions import SessionRecord
    from research_tool.providers.base import SearchProvider
    from research_tool.runtime.composition import ResearchServices
    from research_tool.runtime.stores import EventLogProtocol

EXIT_OK, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED = 0, 2, 3, 130
FORMATS = ("md", "json", "html", "bib")
PRIVACY_MODES = ("local_only", "hybrid", "cloud_allowed")
VERBOSE_HELP = "print every progress event (default: one live line on a terminal, milestones in a pipe)"
FULL_HELP = (
    "on a terminal, print the whole report (findings, gaps, entities, saturation, metadata) "
    "(default: the answer, its short answer and the sources it cites; a pipe or --out always gets the whole report)"
)
SHORT_ID_CHARS = 8  # `sessions` shows at least this much of an id, more when needed to keep it unique

stderr = Console(stderr=True, highlight=False, soft_wrap=True)
T = TypeVar("T")


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports bad usage in one line and exits 2, suggesting the option or command meant."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"research-tool: error: {message}{self.suggestion(message)}\n")

    def suggestion(self, message: str) -> str:
        """`; did you mean --tier?` for `unrecognized arguments: --teir`, or a command's near miss."""
        import difflib
        import re

        words: list[str] = []
        known: list[str] = []
        if message.startswith("unrecognized arguments:"):
            words = [w.split("=")[0] for w in message.split(":", 1)[1].split() if w.startswith("-")]
            known = sorted({o for p in self.all_parsers() for a in p._actions for o in a.option_strings})
        elif (choice := re.match(r"argument .*?: invalid choice: '([^']*)' \(choose from (.*)\)", message)) is not None:
            words = [choice.group(1)]
            known = re.findall(r"'([^']*)'", choice.group(2)) or [c.strip() for c in choice.group(2).split(",")]
        for word in words:
            close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
            if close:
                return f"; did you mean {close[0]}?"
        return ""

    def all_parsers(self) -> list[argparse.ArgumentParser]:
        parsers: list[argparse.ArgumentParser] = [self]
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    parsers.append(sub)
        return parsers


def validation_message(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()) if not isinstance(p, int)) or "input"
    text = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    if where == "query" and first.get("type") == "string_too_long":
        text = f"the question is longer than {first.get('ctx', {}).get('max_length')} characters"
    return f"invalid {where}: {text}"


class Interruption:
    """What a Ctrl-C that reaches `main` should say: the session it leaves behind, if one exists yet."""

    session_id: str | None = None


def terminal_text(text: str) -> str:
    """Source text for the terminal: one line, no control characters (ESC sequences, BEL, NUL)."""
    from research_tool.reporting.text import one_line

    return one_line(text)


# --- argument parsing ---------------------------------------------------------------------------


def session_id_arg(value: str) -> str:
    from research_tool.models.sessions import is_valid_session_id

    if not is_valid_session_id(value):
        raise argparse.ArgumentTypeError(f"invalid session id {value[:80]!r}: use letters, digits, '-' and '_'")
    return value


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the examples' line breaks; option help is wrapped as usual."""


def add_command(sub: Any, name: str, summary: str, example: str) -> OneLineParser:
    """A subcommand whose help ends with an example of its use."""
    parser: OneLineParser = sub.add_parser(
        name,
        help=summary,
        description=summary[0].upper() + summary[1:] + ".",
        epilog=f"example:\n  {example}",
        formatter_class=HelpFormatter,
    )
    return parser


def add_report_options(parser: OneLineParser) -> None:
    parser.add_argument(
        "--format", choices=FORMATS, default="md", help="report format printed or written (default: md)"
    )
    parser.add_argument(
        "--out", type=Path, metavar="PATH", help="write the report to this file (default: print it to stdout)"
    )


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="research-tool",
        description="Self-hosted deep research with cited reports.",
        epilog='example:\n  research-tool run "How do I copy a directory tree?" --corpus ~/docs --providers local\n\n'
        "`research-tool COMMAND --help` says what each option of a command does.",
        formatter_class=HelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    run = add_command(
        sub,
        "run",
        "research a question and print the report",
        'research-tool run "How do I copy a directory tree?" --corpus ~/docs --providers local --tier simple',
    )
    run.add_argument("question", help="the question to research (up to 2000 characters)")
    run.add_argument(
        "--tier",
        choices=TIER_NAMES,
        help="how far to search: simple 2 cycles, standard 5, deep 10 (default: picked from the question: "
        "simple for a short factual one, deep for an overview or comparison, standard otherwise)",
    )
    run.add_argument(
        "--domain", choices=DOMAIN_NAMES, help="the kind of question, which picks providers (default: detected)"
    )
    run.add_argument(
        "--privacy",
        choices=PRIVACY_MODES,
        help="local_only: local providers only; hybrid: web search, local engine; cloud_allowed: anything "
        "(default: local_only when --providers is local and the engine offline, else cloud_allowed)",
    )
    run.add_argument(
        "--providers",
        metavar="A,B",
        help="comma-separated providers to search, e.g. local,wikipedia "
        "(default: chosen from the domain and privacy mode; see `research-tool providers`)",
    )
    run.add_argument(
        "--corpus",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder of your documents for the local provider; repeatable "
        "(default: the folders of RESEARCH_CORPUS_DIRS)",
    )
    add_report_options(run)
    run.add_argument(
        "--no-clarify",
        action="store_true",
        help="never stop to ask clarifying questions (default: ask on a terminal when the question is ambiguous)",
    )
    run.add_argument(
        "--no-fetch",
        action="store_true",
        help="keep web results' snippets, do not download their pages (default: fetch the best pages' full text)",
    )
    run.add_argument(
        "--max-time",
        type=float,
        metavar="S",
        help="end within S seconds of the command's start, the report written: searching stops early enough "
        "to write it (default: the tier's, 120 / 300 / 900 s)",
    )
    run.add_argument(
        "--session-id",
        type=session_id_arg,
        metavar="ID",
        help="name the session: 1-64 letters, digits, '-' and '_' (default: a random id)",
    )
    run.add_argument("--full", action="store_true", help=FULL_HELP)
    run.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)

    resume = add_command(
        sub, "resume", "resume an interrupted session from its last checkpoint", "research-tool resume 3fa9b9cd"
    )
    resume.add_argument("session_id", type=session_id_arg, help="a session id or a unique prefix of one")
    add_report_options(resume)
    resume.add_argument("--full", action="store_true", help=FULL_HELP)
    resume.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)

    sessions = add_command(sub, "sessions", "list sessions, newest first", "research-tool sessions --limit 10")
    sessions.add_argument(
        "--json", action="store_true", help="print every field as JSON (default: a table, tab-separated in a pipe)"
    )
    sessions.add_argument("--limit", type=int, default=50, metavar="N", help="list at most N sessions (default: 50)")

    show = add_command(
        sub, "show", "print a finished session's report", "research-tool show 3fa9b9cd --format html --out report.html"
    )
    show.add_argument("session_id", type=session_id_arg, help="a session id or a unique prefix of one")
    add_report_options(show)

    delete = add_command(
        sub, "delete", "delete sessions with their events, checkpoints and exports", "research-tool delete 3fa9b9cd"
    )
    delete.add_argument(
        "session_ids", nargs="+", metavar="session_id", type=session_id_arg, help="ids or unique prefixes"
    )

    search = add_command(
        sub,
        "search",
        "query one provider and print its normalized results",
        'research-tool search --provider local "copy a directory tree" --corpus ~/docs',
    )
    search.add_argument("--provider", required=True, choices=SEARCH_PROVIDERS, help="the provider to query (required)")
    search.add_argument("query", nargs="?", help="the search query (or --queries)")
    search.add_argument(
        "--queries",
        type=Path,
        metavar="FILE",
        help='a JSON-lines file of {"id", "text"}; prints one JSON line of results per query (default: none)',
    )
    search.add_argument(
        "--max-results", type=int, default=10, metavar="N", help="results per query, 1-100 (default: 10)"
    )
    search.add_argument(
        "--corpus",
        action="append",
        default=[],
        metavar="DIR",
        help="local: search this folder too; repeatable (default: indexed folders and RESEARCH_CORPUS_DIRS)",
    )
    search.add_argument("--json", action="store_true", help="print the results as JSON (default: a table)")

    index = add_command(
        sub,
        "index",
        "index a folder of documents for the local provider (again: only changed files are read)",
        "research-tool index ~/docs",
    )
    index.add_argument(
        "folder",
        type=Path,
        nargs="?",
        help="the folder, subfolders included: md, txt, html, pdf, jsonl, csv, tsv, eml, mbox; with the `documents` "
        "extra docx, pptx, xlsx, odt, ods, epub, rtf; with the `ocr` extra images and scanned PDF pages",
    )
    index.add_argument(
        "--list",
        action="store_true",
        help="list the indexed folders (the local provider's folders) and stop (default: index FOLDER)",
    )
    index.add_argument(
        "--remove",
        type=Path,
        metavar="DIR",
        help="drop this folder from the index and from the local provider's folders; its files are untouched "
        "(default: none)",
    )
    index.add_argument(
        "--semantic",
        action="store_true",
        help="also store dense vectors (the `semantic` extra) and mix them with BM25 when searching this folder "
        "(default: off, or RESEARCH_SEMANTIC_SEARCH=1)",
    )

    providers = add_command(
        sub, "providers", "provider availability, keys, rates and privacy", "research-tool providers --domain academic"
    )
    providers.add_argument(
        "--domain",
        choices=DOMAIN_NAMES,
        help="order the providers as a session of this domain would, with the memory's score (default: none)",
    )
    providers.add_argument("--json", action="store_true", help="print the rows as JSON (default: a table)")

    serve = add_command(
        sub,
        "serve",
        "run the HTTP API and web page (and, unless --no-worker, a worker running sessions)",
        "research-tool serve --port 8080",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    serve.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="serve a non-loopback --host without RESEARCH_API_TOKEN, so anyone who can reach it may use it "
        "(default: refuse)",
    )
    serve.add_argument(
        "--no-worker",
        action="store_true",
        help="API only: sessions run on `research-tool worker` processes (needs RESEARCH_DATABASE_URL; "
        "default: this process runs sessions too)",
    )

    add_command(
        sub,
        "worker",
        "run sessions from the shared queue, no HTTP (needs RESEARCH_DATABASE_URL)",
        "RESEARCH_DATABASE_URL=postgresql://localhost/research research-tool worker",
    )
    add_command(
        sub,
        "mcp",
        "run the MCP server on stdin/stdout (for an MCP client such as Claude Desktop)",
        "research-tool mcp   (as the command an MCP client starts; see docs/mcp.md)",
    )
    add_gc_parser(sub)
    add_users_parsers(sub)
    return parser


def request_from_args(args: argparse.Namespace, llm: str = "offline") -> ResearchRequest:
    from pydantic import ValidationError

    from research_tool.models.request import ResearchRequest

    providers = [p.strip() for p in args.providers.split(",") if p.strip()] if args.providers else None
    refuse_files(args.corpus)
    corpus = [str(Path(c).expanduser().resolve()) for c in args.corpus]
    formats = list(dict.fromkeys([args.format, "json", "md"]))
    try:
        request = ResearchRequest(
            query=args.question,
            tier=args.tier,
            domain=args.domain,
            privacy_mode=args.privacy,
            providers=providers,
            clarify=not args.no_clarify,
            max_execution_time_s=args.max_time,
            formats=formats,
            fetch=not args.no_fetch,
            corpus_dirs=corpus,
        )
    except ValidationError as exc:
        raise CliError(validation_message(exc)) from None
    return request.with_default_privacy(llm)  # the rule every entry point shares (models/request.py)


# --- progress -----------------------------------------------------------------------------------

# Events printed in a pipe without --verbose: the session's milestones, not every search.
MILESTONE_EVENTS = frozenset(
    {
        "session_started",
        "clarification_requested",
        "clarification_timeout",
        "stop_requested",
        "saturation",
        "session_completed",
        "session_failed",
    }
)


def progress_line(phase: str | None, progress: dict[str, Any], provider_errors: int) -> Text:
    """`collect · cycle 2 · 14 sources · 37 facts · saturation: 12% new facts, 5% new entities`."""
    parts = [phase or "starting"]
    iteration = int(progress.get("iteration") or 0)
    if iteration:
        parts.append(f"cycle {iteration}")
    parts.append(f"{int(progress.get('sources_found') or 0)} sources")
    parts.append(f"{int(progress.get('facts_extracted') or 0)} facts")
    saturation = progress.get("saturation_metrics")
    if isinstance(saturation, dict) and "new_facts_ratio" in saturation:
        parts.append(
            f"saturation: {float(saturation['new_facts_ratio']):.0%} new facts, "
            f"{float(saturation.get('new_entities_ratio') or 0):.0%} new entities"
        )
    if provider_errors:
        parts.append(f"{provider_errors} provider error{'s' if provider_errors != 1 else ''}")
    return Text(" · ".join(parts))  # a Text, never markup: phases and counts only, but keep it inert


class ProgressDisplay:
    """On a terminal: one live status line (rich Status). With --verbose: every event, one line each.
    In a pipe: the milestones only."""

    def __init__(self, console: Console, *, verbose: bool) -> None:
        self.console = console
        self.mode = "log" if verbose else ("live" if console.is_terminal else "milestones")
        self._status: Status | None = None
        self._phase: str | None = None
        self._progress: dict[str, Any] = {}
        self._provider_errors = 0

    def start(self) -> None:
        if self.mode == "live" and self._status is None:
            self._status = self.console.status(self._line(), spinner="dots")
            self._status.start()

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _line(self) -> Text:
        return progress_line(self._phase, self._progress, self._provider_errors)

    def on_event(self, event: Event, progress: dict[str, Any]) -> None:
        if event.phase:
            self._phase = event.phase
        if event.type == "provider_error":
            self._provider_errors += 1
        self._progress = progress or self._progress
        if self.mode == "log" or (self.mode == "milestones" and event.type in MILESTONE_EVENTS):
            self.print_event(event)
        elif self._status is not None:
            self._status.update(self._line())

    def print_event(self, event: Event) -> None:
        style = {"provider_error": "yellow", "session_failed": "red", "session_completed": "green"}.get(event.type)
        # the event number only with --verbose, where it is the log's order (`#38`); milestones read as prose
        line = Text(f"#{event.seq:<4} " if self.mode == "log" else "", style="dim")
        if event.phase or self.mode == "log":
            line.append(f"{event.phase or '':<10} ", style="cyan")
        # event text quotes sources: appended as plain text, without terminal control characters
        line.append(terminal_text(event.message), style=style or "")
        self.console.print(line)


async def follow_progress(
    services: ResearchServices, session_id: str, after: int, interactive: bool, display: ProgressDisplay
) -> None:
    """Show the events; answer clarification questions from the terminal when one is attached."""
    async for event in services.events.follow(session_id, after):
        record = await services.store.get(session_id)
        display.on_event(event, record.progress)
        if event.type == "clarification_requested":
            display.stop()
            answers = await ask_questions(event.data.get("questions", [])) if interactive else []
            display.start()
            if answers:
                await services.runner.provide_answers(session_id, answers)
            else:
                await services.runner.decline_clarification(session_id)


async def ask_questions(questions: list[str]) -> list[str]:
    """The terminal's answers, kept within the rules every answer keeps (models.api.clarification_answers):
    control characters dropped, each cut to MAX_ANSWER_CHARS, at most MAX_ANSWERS."""
    from research_tool.core.untrusted_text import clean_text
    from research_tool.models.api import MAX_ANSWER_CHARS, MAX_ANSWERS

    answers: list[str] = []
    for question in questions[:MAX_ANSWERS]:
        stderr.print(Text(f"? {question}", style="bold"))
        answer = await asyncio.to_thread(sys.stdin.readline)
        answers.append(clean_text(answer.strip())[:MAX_ANSWER_CHARS].strip())
    return [a for a in answers if a]


# --- output -------------------------------------------------------------------------------------


def render_report(report: dict[str, Any], fmt: str) -> str:
    from research_tool.models.report import Report
    from research_tool.reporting.export import render_report as render

    return render(Report.model_validate(report), fmt)


def emit_output(text: str, out: Path | None, *, fmt: str = "text") -> None:
    """Write to --out, or to stdout: markdown is rendered on a terminal and stays plain in a pipe."""
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        stderr.print(Text(f"Report written to {out}"))
        return
    if fmt == "md" and sys.stdout.isatty():
        from rich.markdown import Markdown

        Console(highlight=False).print(Markdown(text, hyperlinks=True))
        return
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


# --- running a session --------------------------------------------------------------------------


async def finish_despite_interrupt(work: Awaitable[T]) -> T:
    """Await `work` to the end even if Ctrl-C cancels the caller meanwhile (the report of a completed session
    is printed although the interrupt came just after the session completed)."""
    task = asyncio.ensure_future(work)
    while True:
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()


async def stop_following(progress: asyncio.Task[None], *, wait_s: float) -> None:
    """Let the follower print the final event (it ends by itself), then stop it."""
    if not progress.done():
        await asyncio.wait({progress}, timeout=wait_s)
    progress.cancel()
    await asyncio.gather(progress, return_exceptions=True)


async def drive_session(
    services: ResearchServices,
    session_id: str,
    fmt: str,
    out: Path | None,
    after: int,
    verbose: bool,
    *,
    full: bool = False,
    clock_started: float | None = None,
) -> int:
    runner = services.runner
    display = ProgressDisplay(stderr, verbose=verbose)
    display.start()
    task = runner.launch(session_id, clock_started=clock_started)
    progress = asyncio.create_task(follow_progress(services, session_id, after, sys.stdin.isatty(), display))
    interrupted = False
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:  # Ctrl-C: asyncio.run's SIGINT handler cancels the main task
        interrupted = True
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        record = await finish_despite_interrupt(services.store.get(session_id))
        if not task.done() and record.status != "completed":
            task.cancel()  # the runner records the session as interrupted; its checkpoints stay
        await finish_despite_interrupt(asyncio.gather(task, return_exceptions=True))
    record = await finish_despite_interrupt(services.store.get(session_id))
    if record.status != "completed":
        await finish_despite_interrupt(stop_following(progress, wait_s=0 if interrupted else 2))
        display.stop()
        if interrupted:
            stderr.print(
                Text(f"Interrupted: session {session_id} is saved; resume it with `research-tool resume {session_id}`.")
            )
            return EXIT_INTERRUPTED
        stderr.print(Text(f"Session {session_id} {record.status}: {record.error or ''}", style="red"))
        return EXIT_FAILED
    # Completed: the report is printed even when Ctrl-C arrives from here on.
    await finish_despite_interrupt(stop_following(progress, wait_s=2))
    display.stop()
    report = await finish_despite_interrupt(runner.report(session_id))
    if fmt == "md" and out is None and not full and sys.stdout.isatty():
        more = await finish_despite_interrupt(full_report_hint(services, session_id))
        emit_output(render_summary(report, more), None, fmt="md")
    else:
        emit_output(render_report(report, fmt), out, fmt=fmt)
    stderr.print(Text(completed_line(session_id, record.stop_reason)))
    return EXIT_OK


def completed_line(session_id: str, stop_reason: str | None) -> str:
    """`Session 3fa9… completed: the question's required information was found.` (models.stop_reasons)"""
    from research_tool.models.stop_reasons import stop_label

    why = stop_label(stop_reason)
    return f"Session {session_id} completed: {why}." if why else f"Session {session_id} completed."


async def full_report_hint(services: ResearchServices, session_id: str) -> str:
    """Where the whole report is: the md file the session exported, `show`, and `--full`."""
    completed = await services.events.last_of_type(session_id, "session_completed")
    path = ((completed.data.get("export_paths") or {}).get("md") if completed else None) or ""
    places = [display_path(path)] if path else []
    places += [f"research-tool show {session_id[:12]}", "run with --full"]
    return " · ".join(places)


def display_path(path: str) -> str:
    """A path relative to the working directory when it is inside it (`data/exports/…md`), else as it is."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def render_summary(report: dict[str, Any], more: str) -> str:
    from research_tool.models.report import Report
    from research_tool.reporting.export import render_summary_markdown

    return render_summary_markdown(Report.model_validate(report), more)


async def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    request = request_from_args(args, settings.llm)
    from research_tool.runtime.composition import open_research_services

    async with open_research_services(settings) as services:
        request = services.validate(request)
        if args.session_id and await services.store.exists(args.session_id):
            raise CliError(f"session id already exists: {args.session_id} (use `resume`)")
        session_id = args.session_id or uuid.uuid4().hex
        Interruption.session_id = session_id
        record = await services.runner.create(request, session_id)
        stderr.print(Text(f"Session {record.id}", style="bold"))
        return await drive_session(
            services,
            record.id,
            args.format,
            args.out,
            after=0,
            verbose=args.verbose,
            full=args.full,
            clock_started=process_started(),  # --max-time is the command's wall time (issue 35)
        )


async def cmd_resume(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.runtime.composition import open_research_services
    from research_tool.runtime.users import CLI_ACTOR

    async with open_research_services(settings) as services:
        session_id = await services.store.resolve(args.session_id)
        Interruption.session_id = session_id
        record = await services.store.get(session_id)
        if record.status == "completed":
            emit_output(render_report(await services.runner.report(record.id), args.format), args.out, fmt=args.format)
            return EXIT_OK
        last = await services.events.replay(record.id)
        after = last[-1].seq if last else 0
        await services.users.audit(CLI_ACTOR, "resume", record.id)
        stderr.print(Text(f"Resuming session {record.id} from its last checkpoint.", style="bold"))
        return await drive_session(
            services, record.id, args.format, args.out, after=after, verbose=args.verbose, full=args.full
        )


# --- reading sessions without the research machinery -------------------------------------------------


def owner_alive_for(settings: Settings) -> bool | None:
    """Whether a process runs the sessions of the SQLite data dir; None (unknown: show the stored status) on
    Postgres, where any number of processes share the sessions."""
    from research_tool.runtime.ownership import owner_alive

    return None if settings.database_url else owner_alive(settings.data_dir)


def unique_prefixes(ids: Sequence[str], all_ids: Sequence[str]) -> dict[str, str]:
    """The shortest prefix (at least SHORT_ID_CHARS) of each id that no other id starts with."""
    ordered = sorted(set(all_ids))
    prefixes: dict[str, str] = {}
    for sid in ids:
        neighbours = [o for o in ordered if o != sid]
        length = SHORT_ID_CHARS
        while length < len(sid) and any(o.startswith(sid[:length]) for o in neighbours):
            length += 1
        prefixes[sid] = sid[:length]
    return prefixes


async def cmd_sessions(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.runtime.ownership import shown_status
    from research_tool.runtime.session_records import open_session_records

    if not 1 <= args.limit <= 10_000:
        raise CliError("--limit must be between 1 and 10000")
    async with open_session_records(settings) as sessions:
        records, total = await sessions.store.list_page(limit=args.limit)
        all_ids = sorted(await sessions.store.ids())
    alive = owner_alive_for(settings)
    rows: list[dict[str, Any]] = [
        {
            "session_id": r.id,
            "query": r.query,
            "status": shown_status(r.status, alive),
            "stop_reason": r.stop_reason,
            "created_at": r.created_at,
            "updated_at": r.updated_at,
        }
        for r in records
    ]
    if args.json:
        emit_output(json.dumps({"sessions": rows, "total": total}, indent=2), None)
        return EXIT_OK
    if not sys.stdout.isatty():  # a pipe gets whole ids, one tab-separated line per session
        for row in rows:
            cells = [row["session_id"], row["status"], row["stop_reason"] or "-", row["created_at"][:19], row["query"]]
            sys.stdout.write("\t".join(" ".join(str(c).split()) for c in cells) + "\n")
        return EXIT_OK
    short = unique_prefixes([r["session_id"] for r in rows], all_ids)
    console = Console(highlight=False, soft_wrap=True)
    for line in sessions_table(rows, short, console.width):
        console.print(line)
    console.print(Text(f"{len(rows)} of {total}; `show`, `resume` and `delete` take an id or its prefix", style="dim"))
    return EXIT_OK


SESSION_COLUMNS = ("id", "status", "stop reason", "created")
MIN_QUESTION_CELLS = 8


def created_label(created_at: str, this_year: str) -> str:
    """`11-26 10:03` for this year's sessions, `2025-11-26` for older ones (the stored time, UTC)."""
    if created_at[:4] == this_year:
        return created_at[5:16].replace("T", " ")
    return created_at[:10]


def sessions_table(rows: Sequence[dict[str, Any]], short: dict[str, str], width: int) -> list[Text]:
    """The `sessions` table for a terminal `width` cells wide: id, status, stop reason and date are always
    whole; the question gets what is left, cut with an ellipsis."""
    this_year = time.strftime("%Y", time.gmtime())
    cells = [
        (
            short[row["session_id"]],
            row["status"],
            stop_short_label(row["stop_reason"]),  # in words, as reports say it (the pipe and --json keep codes)
            created_label(row["created_at"], this_year),
        )
        for row in rows
    ]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(SESSION_COLUMNS)]
    room = max(width - sum(widths) - 2 * len(widths), MIN_QUESTION_CELLS)

    def line(fixed: Sequence[str], question: str, style: str = "") -> Text:
        text = Text("  ".join(value.ljust(w) for value, w in zip(fixed, widths, strict=True)) + "  ", style=style)
        shown = Text(" ".join(question.split()))
        shown.truncate(room, overflow="ellipsis")
        return text + shown

    lines = [line(SESSION_COLUMNS, "question", style="bold")]
    lines += [line(c, terminal_text(row["query"])) for c, row in zip(cells, rows, strict=True)]
    return lines


async def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    """Print the report: the file the session exported when it exists (fast), else rendered from the checkpoint."""
    from research_tool.core.errors import SessionStateError
    from research_tool.runtime.ownership import shown_status
    from research_tool.runtime.session_records import open_session_records

    async with open_session_records(settings) as sessions:
        session_id = await sessions.store.resolve(args.session_id)
        record = await sessions.store.get(session_id)
        exported = await exported_report(sessions.events, record, args.format)
    if record.status != "completed":
        status = shown_status(record.status, owner_alive_for(settings))
        hint = f"; resume it with `research-tool resume {session_id}`" if status == "interrupted" else ""
        raise SessionStateError(f"session {session_id} has no report yet (status {status}){hint}")
    if exported is not None:
        emit_output(exported, args.out, fmt=args.format)
        return EXIT_OK
    from research_tool.runtime.composition import open_research_services

    async with open_research_services(settings, own_data_dir=False) as services:  # a server may own the dir
        text = render_report(await services.runner.report(session_id), args.format)
    emit_output(text, args.out, fmt=args.format)
    return EXIT_OK


async def exported_report(events: EventLogProtocol, record: SessionRecord, fmt: str) -> str | None:
    """The text of the report file the session's export step wrote in `fmt`, if it is still there."""
    if record.status != "completed":
        return None
    completed = await events.last_of_type(record.id, "session_completed")
    if completed is None:
        return None
    path = (completed.data.get("export_paths") or {}).get(fmt)
    if not isinstance(path, str):
        return None
    return await asyncio.to_thread(read_text_file, Path(path))


def read_text_file(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


# --- users and audit (issue 44) -------------------------------------------------------------------


def add_users_parsers(sub: Any) -> None:
    users = add_command(
        sub,
        "users",
        "add, revoke and list the users of the HTTP API (each with a key of their own)",
        "research-tool users add alice",
    )
    actions = users.add_subparsers(
        dest="users_command",
        required=True,
        parser_class=OneLineParser,
        metavar="{add,revoke,list}",
        help="add NAME [--admin]: a new user and their key; revoke NAME: their key stops working; list: every user",
    )
    add = add_command(actions, "add", "add a user and print their key (shown this once)", "research-tool users add bob")
    add.add_argument("name", help="1-64 letters, digits, '.', '_', '@' or '-'")
    add.add_argument(
        "--admin", action="store_true", help="an admin sees and changes every user's sessions (default: own only)"
    )
    revoke = add_command(
        actions, "revoke", "revoke a user's key at once (their sessions stay)", "research-tool users revoke bob"
    )
    revoke.add_argument("name", help="the user's name")
    listing = add_command(
        actions, "list", "list users (names, roles, when added or revoked)", "research-tool users list"
    )
    listing.add_argument("--json", action="store_true", help="print the rows as JSON (default: a table)")
    audit = add_command(
        sub,
        "audit",
        "list the audit log, newest first: starts, stops, deletes, resumes, answers, users added or revoked",
        "research-tool audit --user alice",
    )
    audit.add_argument("--user", metavar="NAME", help="only what this user did (default: everyone)")
    audit.add_argument("--limit", type=int, default=100, metavar="N", help="at most N lines (default: 100)")
    audit.add_argument("--json", action="store_true", help="print the rows as JSON (default: a table)")


async def cmd_users(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.runtime.backends import open_users
    from research_tool.runtime.users import CLI_ACTOR

    async with open_users(settings) as users:
        if args.users_command == "add":
            key = await users.add(args.name, admin=args.admin, actor=CLI_ACTOR)
            stderr.print(Text(f"Added user {args.name}{' (admin)' if args.admin else ''}. Their key, shown only now:"))
            print(key)
            return EXIT_OK
        if args.users_command == "revoke":
            if not await users.revoke(args.name, actor=CLI_ACTOR):
                raise CliError(f"no active user named {args.name}")
            stderr.print(Text(f"Revoked user {args.name}: their key no longer works."))
            return EXIT_OK
        rows = await users.list_users()
    shown = [
        {"name": r.name, "role": "admin" if r.admin else "user", "added": r.created_at, "revoked": r.revoked_at}
        for r in rows
    ]
    if args.json:
        print(json.dumps(shown, indent=2))
    else:
        for row in shown:
            print("\t".join(str(row[k] or "") for k in ("name", "role", "added", "revoked")))
    return EXIT_OK


async def users_exist(settings: Settings) -> bool:
    """Whether any user was ever added to the data dir's (or database's) users (`serve` on a reachable host)."""
    from research_tool.runtime.backends import open_users

    async with open_users(settings) as users:
        return await users.any_users()


async def cmd_audit(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.runtime.backends import open_users

    async with open_users(settings) as users:
        rows = await users.audit_rows(limit=max(1, args.limit), actor=args.user)
    shown = [{"ts": r.ts, "user": r.actor, "action": r.action, "target": r.target, "detail": r.detail} for r in rows]
    if args.json:
        print(json.dumps(shown, indent=2))
    else:
        for row in shown:
            print("\t".join(str(row[k] or "") for k in ("ts", "user", "action", "target", "detail")))
    return EXIT_OK


async def cmd_delete(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.runtime.composition import open_research_services
    from research_tool.runtime.users import CLI_ACTOR

    async with open_research_services(settings) as services:
        ids = [await services.store.resolve(given) for given in args.session_ids]
        for session_id in dict.fromkeys(ids):
            await services.runner.delete(session_id)
            await services.users.audit(CLI_ACTOR, "delete", session_id)
            stderr.print(Text(f"Deleted session {session_id}."))
    return EXIT_OK


# --- providers, search, index -------------------------------------------------------------------


def read_batch(path: Path) -> list[tuple[str, str]]:
    if not path.is_file():
        raise CliError(f"queries file not found: {path}")
    batch: list[tuple[str, str]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            batch.append((str(item["id"]), str(item["text"])))
        except (json.JSONDecodeError, KeyError, TypeError):
            raise CliError(f"{path}:{number}: expected a JSON object with 'id' and 'text'") from None
    return batch


def refuse_files(folders: Sequence[str | Path]) -> None:
    """A path that exists but is no folder is named as such (not "not found": the user can see it is there)."""
    for folder in folders:
        path = Path(folder).expanduser()
        if path.exists() and not path.is_dir():
            raise CliError(f"not a folder: {folder}")


def check_folders(folders: Sequence[str]) -> None:
    refuse_files(folders)
    for folder in folders:
        if not Path(folder).expanduser().is_dir():
            raise CliError(f"corpus folder not found: {folder}")


def local_search_folders(args: argparse.Namespace, settings: Settings) -> list[Path]:
    """`search --provider local`: --corpus folders, RESEARCH_CORPUS_DIRS and the folders `index` indexed."""
    from research_tool.providers.local_corpus.indexed_folders import indexed_folders

    folders = [Path(c).resolve() for c in args.corpus]
    folders += [p.expanduser().resolve() for p in settings.corpus_paths()]
    folders += indexed_folders(settings.data_dir)
    folders = list(dict.fromkeys(folders))
    if not folders:
        raise CliError("no local folder to search: index one with `research-tool index DIR` or pass --corpus DIR")
    return folders


def search_inputs(args: argparse.Namespace, settings: Settings) -> tuple[list[tuple[str, str]], list[Path] | None]:
    """The (id, query) batch and the corpus folders of `search`, or CliError on bad input."""
    if bool(args.query) == bool(args.queries):
        raise CliError("give either a QUERY or --queries FILE")
    if not 1 <= args.max_results <= 100:
        raise CliError("--max-results must be between 1 and 100")
    if args.query is not None and not args.query.strip():
        raise CliError("the query is empty")
    check_folders(args.corpus)
    batch = read_batch(args.queries) if args.queries else [("", args.query)]
    corpus = local_search_folders(args, settings) if args.provider == "local" else None
    return batch, corpus


async def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.providers.gateway import SearchGateway
    from research_tool.providers.http_client import create_http_client
    from research_tool.providers.registry import create_provider

    batch, corpus = search_inputs(args, settings)
    async with create_http_client() as client:
        provider = create_provider(args.provider, settings, client, corpus_dirs=corpus)
        reason = provider.unavailable_reason()
        if reason:
            raise CliError(f"provider '{args.provider}' is not available: {reason}")
        gateway = SearchGateway()
        failed = 0
        for query_id, text in batch:
            outcome = await gateway.search(provider, text, args.max_results, deadline=time.monotonic() + 120)
            results = [r.model_dump(mode="json") for r in outcome.results]
            if outcome.failure:
                failed += 1
            if args.queries:
                line: dict[str, Any] = {"id": query_id, "results": results}
                if outcome.failure:
                    line["error"] = outcome.failure.model_dump(mode="json")
                sys.stdout.write(json.dumps(line) + "\n")
            elif outcome.failure:
                stderr.print(
                    Text(
                        f"{outcome.failure.provider} failed ({outcome.failure.error_type}): {outcome.failure.message}",
                        style="red",
                    )
                )
            elif args.json:
                emit_output(json.dumps(results, indent=2), None)
            else:
                print_results_table(results)
        return EXIT_FAILED if failed and not args.queries else EXIT_OK


TABLE_FRAME_CHARS = 13  # a 4-column rich table's borders and padding


def print_results_table(results: list[dict[str, Any]], console: Console | None = None) -> None:
    """One row per result. A URL longer than its column loses its middle, never its end (a local document's
    file name is what tells the rows apart); the title wraps at words, and a cut title ends with "…"."""
    from rich.table import Column, Table

    console = console or Console(highlight=False)
    dates = [terminal_text(r.get("published_date") or "") for r in results]
    fixed = TABLE_FRAME_CHARS + len(str(len(results))) + max([4, *map(len, dates)])
    url_width = max(24, (console.width - fixed) // 2)
    table = Table("#", "title", Column("url", no_wrap=True, overflow="ignore"), "date")
    for i, (r, date) in enumerate(zip(results, dates, strict=True), start=1):
        title, url = shorten(terminal_text(r["title"] or ""), 70), elide_middle(terminal_text(r["url"]), url_width)
        table.add_row(str(i), Text(title, overflow="fold"), Text(url), Text(date))
    console.print(table)


def elide_middle(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: its start and its end around "…" when it is longer."""
    if len(text) <= limit:
        return text
    tail = (limit - 1) * 2 // 3
    return text[: limit - 1 - tail] + "…" + text[-tail:]


def shorten(text: str, limit: int) -> str:
    """`text` cut at a word boundary to at most `limit` characters, with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:-") + "…"


async def cmd_index(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.providers.local_corpus.embeddings import EncoderUnavailableError, unavailable_reason
    from research_tool.providers.local_corpus.hybrid import HybridIndex, open_corpus_index
    from research_tool.providers.local_corpus.indexed_folders import remember_folder

    if args.list or args.remove is not None:
        if args.folder is not None or (args.list and args.remove is not None):
            raise CliError("give one of: a FOLDER to index, --list, or --remove DIR")
        return await (index_list(settings) if args.list else index_remove(args.remove, settings))
    if args.folder is None:
        raise CliError("give a FOLDER to index (or --list, or --remove DIR)")
    refuse_files([args.folder])
    if not args.folder.is_dir():
        raise CliError(f"folder not found: {args.folder}")
    folder = args.folder.resolve()
    semantic = bool(args.semantic or settings.semantic_search)
    reason = unavailable_reason() if semantic else None
    if reason:
        raise CliError(f"semantic indexing is not available: {reason}")
    index = open_corpus_index(settings.db_path("local_index.db"), semantic=semantic)
    try:
        if stderr.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
            # transient, and shown only once the folder has taken a few seconds (OCR is slow)
            with Progress(*columns, console=stderr, transient=True, auto_refresh=False) as bar:
                files = bar.add_task("reading files", total=None)
                vectors = bar.add_task("embedding new and changed documents", total=None, visible=False)
                started = time.monotonic()

                def file_done(done: int, total: int) -> None:
                    bar.update(files, completed=done, total=total)
                    if time.monotonic() - started >= PROGRESS_AFTER_S:
                        bar.refresh()

                def embedded(done: int, total: int) -> None:
                    bar.update(vectors, completed=done, total=total, visible=True)
                    bar.refresh()

                if isinstance(index, HybridIndex):
                    stats = await index.index_folder(folder, progress=embedded, file_progress=file_done)
                else:
                    stats = await index.index_folder(folder, file_progress=file_done)
        else:
            stats = await index.index_folder(folder)
    except EncoderUnavailableError as exc:
        raise CliError(exc.message) from None
    if isinstance(index, HybridIndex) and index.last_embed_error:
        raise CliError(f"indexed without vectors: {index.last_embed_error}")
    remember_folder(settings.data_dir, folder)
    for line in skipped_lines(folder, stats.skipped, stats.cut):
        stderr.print(Text(line))
    summary = index_summary(folder, stats.as_dict(), stats.kinds)
    stderr.print(Text(summary))
    return EXIT_OK


PROGRESS_AFTER_S = 2.0
MAX_UNSUPPORTED_NAMED = 20


def skipped_lines(folder: Path, skipped: Sequence[tuple[str, str]], cut: Sequence[tuple[str, str]]) -> list[str]:
    """One line for each file `index` left out or cut, with its reason, paths relative to the folder; files of
    a type it does not read are named up to MAX_UNSUPPORTED_NAMED, then counted."""

    def shown(path: str) -> str:
        try:
            return str(Path(path).relative_to(folder))
        except ValueError:
            return path

    lines = []
    unsupported = [path for path, reason in skipped if reason == "unsupported"]
    for path, reason in skipped:
        if reason != "unsupported":
            lines.append(f"Skipped {shown(path)}: {reason}")
    for path in unsupported[:MAX_UNSUPPORTED_NAMED]:
        lines.append(f"Skipped {shown(path)}: unsupported file type")
    if len(unsupported) > MAX_UNSUPPORTED_NAMED:
        lines.append(f"Skipped {len(unsupported) - MAX_UNSUPPORTED_NAMED} more files of unsupported types")
    for path, reason in cut:
        lines.append(f"Cut {shown(path)}: {reason}")
    return lines


async def index_list(settings: Settings) -> int:
    from research_tool.providers.local_corpus.indexed_folders import remembered_folders

    folders = remembered_folders(settings.data_dir)
    if not folders:
        stderr.print(Text("No folder is indexed: index one with `research-tool index DIR`."))
        return EXIT_OK
    for folder, exists in folders:
        sys.stdout.write(f"{folder}\n" if exists else f"{folder}  (missing)\n")
    return EXIT_OK


async def index_remove(folder: Path, settings: Settings) -> int:
    from research_tool.providers.local_corpus.index import CorpusIndex
    from research_tool.providers.local_corpus.indexed_folders import forget_folder

    target = await asyncio.to_thread(lambda: folder.expanduser().resolve())
    forgotten = forget_folder(settings.data_dir, target)
    removed = await CorpusIndex(settings.db_path("local_index.db")).remove_folder(target)
    if not forgotten and not removed:
        raise CliError(f"not an indexed folder: {folder} (see `research-tool index --list`)")
    noun = "document" if removed == 1 else "documents"
    stderr.print(Text(f"Removed {target} from the index: {removed} {noun}; later answers no longer search it."))
    return EXIT_OK


def index_summary(folder: Path, stats: dict[str, float], kinds: dict[str, int] | None = None) -> str:
    """`Indexed /docs: 2788 documents (12 new, 1 changed, 0 removed; 3 files failed) from 40 files (38 pdf,
    2 docx) in 0.4 s.`"""

    def count(n: float, word: str) -> str:
        return f"{int(n)} {word}{'' if int(n) == 1 else 's'}"

    changes = [
        f"{int(stats.get('docs_added', 0))} new",
        f"{int(stats.get('docs_updated', 0))} changed",
        f"{int(stats.get('docs_removed', 0))} removed",
    ]
    trouble = [
        f"{count(stats[key], 'file')} {what}"
        for key, what in (("files_failed", "unreadable"), ("files_skipped", "skipped"))
        if stats.get(key)
    ]
    detail = ", ".join(changes) + ("; " + ", ".join(trouble) if trouble else "")
    total = count(stats.get("docs_total", 0), "document")
    files = ""
    if kinds:
        by_kind = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda item: (-item[1], item[0])))
        files = f" from {count(sum(kinds.values()), 'file')} ({by_kind})"
    return f"Indexed {folder}: {total} ({detail}){files} in {float(stats.get('duration_s', 0)):.1f} s."


def local_folders_row(provider: SearchProvider) -> dict[str, list[str]]:
    """`providers`' extra field for `local`: the folders it searches (indexed by `research-tool index`, and
    RESEARCH_CORPUS_DIRS); nothing for the others."""
    from research_tool.providers.search.local import LocalProvider

    return {"folders": [str(d) for d in provider.corpus_dirs]} if isinstance(provider, LocalProvider) else {}


async def cmd_providers(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.models.domain import DOMAINS
    from research_tool.providers.http_client import create_http_client
    from research_tool.providers.registry import PROVIDER_CLASSES, create_provider
    from research_tool.runtime.backends import open_memory

    names = list(PROVIDER_CLASSES)
    ranking: dict[str, float] = {}
    if args.domain:
        async with open_memory(settings) as memory:
            ranked = await memory.rank_providers(args.domain, DOMAINS[args.domain].provider_order())
        ranking = dict(ranked)
        names = [n for n, _ in ranked] + [n for n in names if n not in ranking]
    rows: list[dict[str, Any]] = []
    async with create_http_client() as client:
        for name in names:
            provider = create_provider(name, settings, client)
            rows.append(
                {
                    "name": name,
                    "available": provider.is_available(),
                    "key_present": provider.has_key(),
                    "requests_per_second": provider.requests_per_second,
                    "privacy": provider.privacy,
                    "reason": provider.unavailable_reason(),
                    "score": ranking.get(name),
                    **local_folders_row(provider),
                }
            )
    if args.json:
        emit_output(json.dumps(rows, indent=2), None)
        return EXIT_OK
    from rich.table import Table

    columns = ["provider", "available", "key", "rate/s", "privacy", *(["memory score"] if args.domain else []), "note"]
    table = Table(*columns)
    piped = not sys.stdout.isatty()  # a pipe gets one tab-separated line per provider, nothing cut
    for row in rows:
        key = {True: "yes", False: "no", None: "not needed"}[row["key_present"]]
        cells = [
            row["name"],
            "yes" if row["available"] else "no",
            key,
            f"{row['requests_per_second']:.3f}".rstrip("0").rstrip("."),
            row["privacy"],
        ]
        if args.domain:
            cells.append("" if row["score"] is None else f"{row['score']:.2f}")
        note = row["reason"] or ("folders: " + ", ".join(row["folders"]) if row.get("folders") else "")
        if piped:
            sys.stdout.write("\t".join([*cells, " ".join(terminal_text(note).split())]) + "\n")
        else:
            table.add_row(*cells, Text(note))
    if not piped:
        Console(highlight=False).print(table)
    return EXIT_OK


# --- gc (storage retention; runtime/janitor.py) ----------------------------------------------------


def add_gc_parser(sub: Any) -> None:
    def days(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of days: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError("the number of days must be above 0")
        return value

    gc = add_command(
        sub,
        "gc",
        "delete old sessions (RESEARCH_RETENTION_DAYS) and reclaim disk space",
        "research-tool gc --older-than-days 30",
    )
    gc.add_argument(
        "--older-than-days",
        type=days,
        metavar="N",
        help="delete finished sessions last updated over N days ago "
        "(default: RESEARCH_RETENTION_DAYS; unset: keep every session)",
    )
    gc.add_argument("--json", action="store_true", help="print the summary as JSON (default: sentences)")


async def cmd_gc(args: argparse.Namespace, settings: Settings) -> int:
    """Delete finished sessions last updated more than N days ago (none when no retention is set), then what
    no session refers to (checkpoints, events, page texts, exports), keep finished sessions' last checkpoint
    only, and vacuum the SQLite files (a file from before auto_vacuum=INCREMENTAL is rewritten once)."""
    import sqlite3

    from research_tool.runtime.composition import open_research_services

    retention = args.older_than_days if args.older_than_days is not None else settings.retention_days
    try:
        async with open_research_services(settings) as services:
            summary = await services.janitor.collect_garbage(retention_days=retention, convert=True)
    except sqlite3.OperationalError as exc:  # e.g. a server holding the files while VACUUM needs them alone
        stderr.print(
            f"research-tool: error: gc could not finish: {exc} (is a server using this data dir?)", markup=False
        )
        return EXIT_FAILED
    if args.json:
        emit_output(summary.model_dump_json(indent=2), None)
        return EXIT_OK
    if summary.cutoff:
        stderr.print(f"Deleted {summary.sessions_deleted} sessions last updated before {summary.cutoff}.", markup=False)
    else:
        stderr.print("No retention set (RESEARCH_RETENTION_DAYS, --older-than-days): every session is kept.")
    stderr.print(
        f"Removed data of {summary.orphans_deleted} sessions that no longer exist and {summary.texts_deleted} "
        f"page texts no session uses; {summary.sessions_pruned} finished sessions keep their last checkpoint.",
        markup=False,
    )
    stderr.print(f"Reclaimed {summary.bytes_reclaimed / 1e6:.1f} MB.", markup=False)
    return EXIT_OK


CLUSTER_ONLY = "needs RESEARCH_DATABASE_URL (a postgresql:// URL): sessions are shared through Postgres"


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import signal

    from research_tool.core.extras import require_postgres_extra
    from research_tool.runtime.http_server import (
        is_loopback_host,
        open_serving_refusal,
        open_serving_warning,
        run_server,
    )
    from research_tool.runtime.ownership import DataDirOwner, record_serving_url
    from research_tool.runtime.shared_limits import check_shared_limits_settings

    has_users = not is_loopback_host(args.host) and asyncio.run(users_exist(settings))
    refusal = open_serving_refusal(
        settings, args.host, allow_unauthenticated=args.allow_unauthenticated, has_users=has_users
    )
    if refusal is not None:
        raise CliError(refusal)
    warning = open_serving_warning(
        settings, args.host, allow_unauthenticated=args.allow_unauthenticated, has_users=has_users
    )
    if warning is not None:
        stderr.print(Text(f"research-tool: warning: {warning}"))

    # A missing extra is one line of bad input here, not a traceback from inside the app's startup.
    if settings.database_url:
        require_postgres_extra()
    check_shared_limits_settings(settings)
    if args.no_worker:
        if not settings.database_url:
            stderr.print(Text(f"research-tool: error: serve --no-worker {CLUSTER_ONLY}"))
            return EXIT_BAD_INPUT
        os.environ["RESEARCH_RUN_WORKER"] = "false"  # uvicorn builds the app from the environment
        settings = settings.model_copy(update={"run_worker": False})
    refuse_port_in_use(args.host, args.port)
    # SQLite: this process owns the data dir for the server's whole life, or exits 2 naming the owner's PID.
    owner = DataDirOwner(None) if settings.database_url else DataDirOwner.claim(settings.data_dir)
    # uvicorn ends a SIGTERM'd server by raising SIGTERM again once it has stopped; with the default handler
    # that killed the process before the `finally` below (server.url and the PID in owner.lock were left).
    previous = signal.signal(signal.SIGTERM, exit_on_sigterm)
    try:
        if not settings.database_url:
            record_serving_url(settings.data_dir, server_url(args.host, args.port))
        run_server(settings, args.host, args.port)
    finally:
        if not settings.database_url:
            record_serving_url(settings.data_dir, None)
        owner.release()
        signal.signal(signal.SIGTERM, previous)
    return EXIT_OK


def exit_on_sigterm(signum: int, _frame: object) -> NoReturn:
    """SIGTERM outside uvicorn's own handling: unwind (so the data dir's files are cleaned up), exit 143."""
    raise SystemExit(128 + signum)


def server_url(host: str, port: int) -> str:
    """The URL a browser on this machine opens for `serve --host H --port P` (a wildcard host: loopback)."""
    name = host.strip().strip("[]")
    name = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(name, name)
    return f"http://[{name}]:{port}/" if ":" in name else f"http://{name}:{port}/"


def refuse_port_in_use(host: str, port: int) -> None:
    """Bind `host:port` as uvicorn will (SO_REUSEADDR) and let go: a port another process listens on is one
    line and exit 2 here, before the app starts, rather than uvicorn's log lines and exit 3."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CliError(f"cannot listen on {host}: {exc.strerror or exc}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CliError(
                    f"port {port} on {host} is in use (another server?): stop it, or pick another port with "
                    f"--port N (make serve PORT=N)"
                ) from None
            raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


async def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    """Run sessions claimed from the shared queue until SIGTERM or Ctrl-C; its sessions' leases are released
    on the way out, so other workers resume them at once."""
    import signal

    from research_tool.engines.cpu_pool import cpu_pool
    from research_tool.runtime.composition import open_research_services

    if not settings.database_url:
        raise CliError(f"worker {CLUSTER_ONLY}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with (
        cpu_pool(
            settings.cpu_workers,
            settings.cpu_worker_niceness,
            log_format=settings.log_format,
            log_level=settings.log_level,
        ),
        open_research_services(settings, worker=True),
    ):
        stderr.print(Text("Worker started: running sessions from the shared queue (Ctrl-C stops it).", style="bold"))
        await stop.wait()
    stderr.print(Text("Worker stopped; its unfinished sessions were handed back to the queue."))
    return EXIT_OK


async def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.api.mcp_stdio import serve_stdio

    await serve_stdio(settings)
    return EXIT_OK


COMMANDS = {
    "run": cmd_run,
    "resume": cmd_resume,
    "sessions": cmd_sessions,
    "show": cmd_show,
    "delete": cmd_delete,
    "search": cmd_search,
    "index": cmd_index,
    "providers": cmd_providers,
    "mcp": cmd_mcp,
    "worker": cmd_worker,
    "gc": cmd_gc,
    "users": cmd_users,
    "audit": cmd_audit,
}


def interrupted_message() -> str:
    session_id = Interruption.session_id
    if session_id is None:
        return "Interrupted before a session was created; nothing was saved."
    return f"Interrupted: session {session_id} is saved; resume it with `research-tool resume {session_id}`."


def entry() -> NoReturn:
    """The `research-tool` command: `main`, then an exit that skips the interpreter's teardown of its modules,
    which on a loaded machine takes seconds after everything is written and closed (issue 35: `run --max-time`
    is the command's wall time). Exit handlers still run (log handlers, trace export, temporary files)."""
    code = main()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, so that a reader gone away is seen while it can still be handled
        return code
    except KeyboardInterrupt:
        stderr.print(Text(interrupted_message()))
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return closed_pipe()


def closed_pipe() -> int:
    """The reader of stdout went away (`research-tool sessions | head -1`): what it wanted it has, so this is
    no error. Nothing more is written to the pipe (stdout points at /dev/null, so the interpreter's last flush
    is quiet too), and a session that ran is saved as usual."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return EXIT_OK


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):  # a bare `research-tool`: the commands, not a usage error
        sys.stderr.write(parser.format_help())
        return EXIT_BAD_INPUT
    args = parser.parse_args(argv)
    Interruption.session_id = None
    from pydantic import ValidationError

    from research_tool.core.errors import BadInputError, ResearchToolError, SessionNotFoundError, SessionStateError
    from research_tool.core.logging import configure_logging
    from research_tool.core.settings import Settings, reset_settings_cache

    reset_settings_cache()
    try:
        settings = Settings()
    except ValidationError as exc:
        stderr.print(Text(f"research-tool: error: configuration: {validation_message(exc)}"))
        return EXIT_BAD_INPUT
    # a session's provider warnings are in its report and events, not between the progress lines (-v shows them)
    quiet = args.command in ("run", "resume") and not args.verbose
    configure_logging(settings.log_format, os.environ.get("RESEARCH_LOG_LEVEL", "ERROR" if quiet else "WARNING"))
    try:
        if args.command == "serve":
            return cmd_serve(args, settings)
        return asyncio.run(COMMANDS[args.command](args, settings))
    except (CliError, BadInputError, SessionNotFoundError, SessionStateError) as exc:
        stderr.print(Text(f"research-tool: error: {exc}"))
        return exc.code if isinstance(exc, CliError) else EXIT_BAD_INPUT
    except ResearchToolError as exc:
        stderr.print(Text(f"research-tool: error: {exc.message}"))
        return EXIT_FAILED
