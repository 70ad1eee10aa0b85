"""`research-tool`: run, resume and inspect research sessions from a terminal (DESIGN §6).

Exit codes: 0 done, 2 bad input, 3 failed, 130 interrupted (the session stays resumable).
Progress goes to stderr; the report (or JSON) to stdout or --out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from research_tool.core.errors import BadInputError, ResearchToolError, SessionNotFoundError, SessionStateError
from research_tool.core.logging import configure_logging
from research_tool.core.settings import Settings, reset_settings_cache
from research_tool.models.domain import DOMAIN_NAMES
from research_tool.models.request import SEARCH_PROVIDERS, ResearchRequest
from research_tool.models.tiers import TIER_NAMES

EXIT_OK, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED = 0, 2, 3, 130
FORMATS = ("md", "json", "html", "bib")
PRIVACY_MODES = ("local_only", "hybrid", "cloud_allowed")

stderr = Console(stderr=True, highlight=False, soft_wrap=True)


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports bad usage in one line and exits 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"research-tool: error: {message}\n")


def validation_message(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()) if not isinstance(p, int)) or "input"
    text = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    if where == "query" and first.get("type") == "string_too_long":
        text = f"the question is longer than {first.get('ctx', {}).get('max_length')} characters"
    return f"invalid {where}: {text}"


# --- argument parsing ---------------------------------------------------------------------------


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog="research-tool", description="Self-hosted deep research with cited reports.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    run = sub.add_parser("run", help="research a question and print the report")
    run.add_argument("question")
    run.add_argument("--tier", choices=TIER_NAMES)
    run.add_argument("--domain", choices=DOMAIN_NAMES)
    run.add_argument("--privacy", choices=PRIVACY_MODES, default="cloud_allowed")
    run.add_argument("--providers", help="comma-separated provider names")
    run.add_argument("--corpus", action="append", default=[], metavar="DIR", help="local documents (repeatable)")
    run.add_argument("--format", choices=FORMATS, default="md")
    run.add_argument("--out", type=Path)
    run.add_argument("--no-clarify", action="store_true")
    run.add_argument("--no-fetch", action="store_true")
    run.add_argument("--max-time", type=float, metavar="S")
    run.add_argument("--session-id")

    resume = sub.add_parser("resume", help="resume an interrupted session")
    resume.add_argument("session_id")
    resume.add_argument("--format", choices=FORMATS, default="md")
    resume.add_argument("--out", type=Path)

    sessions = sub.add_parser("sessions", help="list sessions, newest first")
    sessions.add_argument("--json", action="store_true")
    sessions.add_argument("--limit", type=int, default=50)

    show = sub.add_parser("show", help="print a finished session's report")
    show.add_argument("session_id")
    show.add_argument("--format", choices=FORMATS, default="md")

    search = sub.add_parser("search", help="query one provider and print normalized results")
    search.add_argument("--provider", required=True, choices=SEARCH_PROVIDERS)
    search.add_argument("query", nargs="?")
    search.add_argument("--queries", type=Path, help="JSONL file of {id, text}")
    search.add_argument("--max-results", type=int, default=10)
    search.add_argument("--corpus", action="append", default=[], metavar="DIR")
    search.add_argument("--json", action="store_true")

    index = sub.add_parser("index", help="index a folder of documents for the local provider")
    index.add_argument("folder", type=Path)

    providers = sub.add_parser("providers", help="provider availability, keys, rates, privacy")
    providers.add_argument("--domain", choices=DOMAIN_NAMES)
    providers.add_argument("--json", action="store_true")

    serve = sub.add_parser("serve", help="run the HTTP API (one worker)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    return parser


def request_from_args(args: argparse.Namespace) -> ResearchRequest:
    providers = [p.strip() for p in args.providers.split(",") if p.strip()] if args.providers else None
    corpus = [str(Path(c).expanduser().resolve()) for c in args.corpus]
    if corpus and providers is None:
        providers = None  # the domain order includes `local` when a corpus is given
    formats = list(dict.fromkeys([args.format, "json", "md"]))
    try:
        return ResearchRequest(
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


# --- progress and output ------------------------------------------------------------------------


def render_event(event: Any) -> None:
    phase = f"[cyan]{event.phase:<10}[/]" if event.phase else " " * 10
    style = {"provider_error": "yellow", "session_failed": "red", "session_completed": "green"}.get(event.type, "")
    message = f"[{style}]{event.message}[/]" if style else event.message
    stderr.print(f"[dim]{event.seq:>4}[/] {phase} {message}", markup=True, highlight=False)


async def follow_progress(services: Any, session_id: str, after: int, interactive: bool) -> None:
    """Print every event; answer clarification questions from the terminal when one is attached."""
    async for event in services.events.follow(session_id, after):
        render_event(event)
        if event.type == "clarification_requested":
            answers = await ask_questions(event.data.get("questions", [])) if interactive else []
            if answers:
                await services.runner.provide_answers(session_id, answers)
            else:
                await services.runner.decline_clarification(session_id)


async def ask_questions(questions: list[str]) -> list[str]:
    answers: list[str] = []
    for question in questions:
        stderr.print(f"[bold]? {question}[/]")
        answer = await asyncio.to_thread(sys.stdin.readline)
        answers.append(answer.strip())
    return [a for a in answers if a]


def render_report(report: dict[str, Any], fmt: str) -> str:
    from research_tool.models.report import Report
    from research_tool.reporting.export import render_report as render

    return render(Report.model_validate(report), fmt)


def emit_output(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    stderr.print(f"Report written to {out}")


# --- commands -----------------------------------------------------------------------------------


async def drive_session(services: Any, session_id: str, fmt: str, out: Path | None, after: int) -> int:
    runner = services.runner
    interactive = sys.stdin.isatty()
    task = runner.launch(session_id)
    progress = asyncio.create_task(follow_progress(services, session_id, after, interactive))
    try:
        await asyncio.shield(task)
    finally:
        await asyncio.sleep(0)
        if not progress.done():
            try:
                await asyncio.wait_for(progress, timeout=2)
            except TimeoutError:
                progress.cancel()
    record = await services.store.get(session_id)
    if record.status != "completed":
        stderr.print(f"[red]Session {session_id} {record.status}: {record.error or ''}[/]")
        return EXIT_FAILED
    emit_output(render_report(await runner.report(session_id), fmt), out)
    stderr.print(f"Session {session_id} completed (stop reason: {record.stop_reason}).")
    return EXIT_OK


async def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    request = request_from_args(args)
    from research_tool.runtime.composition import open_research_services

    async with open_research_services(settings) as services:
        services.validate(request)
        if args.session_id and await services.store.exists(args.session_id):
            raise CliError(f"session id already exists: {args.session_id} (use `resume`)")
        record = await services.runner.create(request, args.session_id)
        stderr.print(f"Session [bold]{record.id}[/] (resume with: research-tool resume {record.id})")
        return await drive_session(services, record.id, args.format, args.out, after=0)


async def cmd_resume(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.runtime.composition import open_research_services

    async with open_research_services(settings) as services:
        record = await services.store.get(args.session_id)
        if record.status == "completed":
            emit_output(render_report(await services.runner.report(record.id), args.format), args.out)
            return EXIT_OK
        last = await services.events.replay(record.id)
        after = last[-1].seq if last else 0
        stderr.print(f"Resuming session [bold]{record.id}[/] from its last checkpoint.")
        return await drive_session(services, record.id, args.format, args.out, after=after)


async def cmd_sessions(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.runtime.session_store import SessionStore
    from research_tool.runtime.storage import open_database

    conn = await open_database(settings.db_path("sessions.db"))
    try:
        records, total = await SessionStore(conn).list_page(limit=args.limit)
    finally:
        await conn.close()
    if args.json:
        rows = [
            {
                "session_id": r.id,
                "query": r.query,
                "status": r.status,
                "stop_reason": r.stop_reason,
                "created_at": r.created_at,
                "updated_at": r.updated_at,
            }
            for r in records
        ]
        emit_output(json.dumps({"sessions": rows, "total": total}, indent=2), None)
        return EXIT_OK
    table = Table("session", "status", "stop reason", "created", "question")
    for r in records:
        table.add_row(r.id, r.status, r.stop_reason or "", r.created_at[:19], r.query[:60])
    Console().print(table)
    return EXIT_OK


async def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.runtime.composition import open_research_services

    async with open_research_services(settings) as services:
        emit_output(render_report(await services.runner.report(args.session_id), args.format), None)
    return EXIT_OK


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


def search_inputs(args: argparse.Namespace) -> tuple[list[tuple[str, str]], list[Path] | None]:
    """The (id, query) batch and the resolved corpus folders of `search`, or CliError on bad input."""
    if bool(args.query) == bool(args.queries):
        raise CliError("give either a QUERY or --queries FILE")
    if not 1 <= args.max_results <= 100:
        raise CliError("--max-results must be between 1 and 100")
    if args.query is not None and not args.query.strip():
        raise CliError("the query is empty")
    for folder in args.corpus:
        if not Path(folder).is_dir():
            raise CliError(f"corpus folder not found: {folder}")
    batch = read_batch(args.queries) if args.queries else [("", args.query)]
    return batch, [Path(c).resolve() for c in args.corpus] or None


async def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.providers.gateway import SearchGateway
    from research_tool.providers.http_client import create_http_client
    from research_tool.providers.registry import create_provider

    batch, corpus = search_inputs(args)
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
                    f"[red]{outcome.failure.provider} failed ({outcome.failure.error_type}): "
                    f"{outcome.failure.message}[/]"
                )
            elif args.json:
                emit_output(json.dumps(results, indent=2), None)
            else:
                print_results_table(results)
        return EXIT_FAILED if failed and not args.queries else EXIT_OK


def print_results_table(results: list[dict[str, Any]]) -> None:
    table = Table("#", "title", "url", "date")
    for i, r in enumerate(results, start=1):
        table.add_row(str(i), (r["title"] or "")[:70], r["url"][:80], r.get("published_date") or "")
    Console().print(table)


async def cmd_index(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.providers.local_corpus.index import CorpusIndex

    if not args.folder.is_dir():
        raise CliError(f"folder not found: {args.folder}")
    index = CorpusIndex(settings.db_path("local_index.db"))
    stats = await index.index_folder(args.folder.resolve())
    stderr.print(" ".join(f"{k}={v}" for k, v in stats.as_dict().items()))
    return EXIT_OK


async def cmd_providers(args: argparse.Namespace, settings: Settings) -> int:
    from research_tool.models.domain import DOMAINS
    from research_tool.providers.http_client import create_http_client
    from research_tool.providers.memory import MemoryStore
    from research_tool.providers.registry import PROVIDER_CLASSES, create_provider

    names = list(PROVIDER_CLASSES)
    ranking: dict[str, float] = {}
    if args.domain:
        memory = MemoryStore.from_settings(settings)
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
                }
            )
    if args.json:
        emit_output(json.dumps(rows, indent=2), None)
        return EXIT_OK
    columns = ["provider", "available", "key", "rate/s", "privacy", *(["memory score"] if args.domain else []), "note"]
    table = Table(*columns)
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
        table.add_row(*cells, row["reason"] or "")
    Console().print(table)
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    uvicorn.run("research_tool.api.app:create_app", factory=True, host=args.host, port=args.port, workers=1)
    return EXIT_OK


COMMANDS = {
    "run": cmd_run,
    "resume": cmd_resume,
    "sessions": cmd_sessions,
    "show": cmd_show,
    "search": cmd_search,
    "index": cmd_index,
    "providers": cmd_providers,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    reset_settings_cache()
    try:
        settings = Settings()
    except ValidationError as exc:
        stderr.print(f"research-tool: error: configuration: {validation_message(exc)}")
        return EXIT_BAD_INPUT
    configure_logging(settings.log_format, os.environ.get("RESEARCH_LOG_LEVEL", "WARNING"))
    if args.command == "serve":
        return cmd_serve(args)
    try:
        return asyncio.run(COMMANDS[args.command](args, settings))
    except KeyboardInterrupt:
        stderr.print("Interrupted; the session is saved and can be resumed with `research-tool resume ID`.")
        return EXIT_INTERRUPTED
    except (CliError, BadInputError, SessionNotFoundError, SessionStateError) as exc:
        stderr.print(f"research-tool: error: {exc}", markup=False)
        return exc.code if isinstance(exc, CliError) else EXIT_BAD_INPUT
    except ResearchToolError as exc:
        stderr.print(f"research-tool: error: {exc.message}", markup=False)
        return EXIT_FAILED
