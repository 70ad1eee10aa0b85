"""The web page at `/` and the API docs at `/docs` and `/redoc`, all served from package files so they
work without internet: the page is plain HTML, CSS and JavaScript modules under api/static/ (no build
step), and the docs load Swagger UI and ReDoc from the `fastapi-offline` package's copies of their
bundles (mounted at /docs-assets), not from a CDN.

These are public static shells: they hold no data. Everything they show comes from the API, which
asks for the token; the page asks a person for it once and keeps it in the tab's sessionStorage.
"""

from __future__ import annotations

import asyncio
from functools import cache
from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

STATIC_URL = "/static"
DOCS_ASSETS_URL = "/docs-assets"
# The page renders source text with textContent only; the policy forbids any script but its own files,
# so even a mistake there could not run a source's script.
PAGE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
# Swagger UI and ReDoc set inline styles and ReDoc starts a worker from a blob.
DOCS_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; worker-src 'self' blob:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
# ReDoc's sidebar shows its vendor's logo from a CDN: the one request the UI would send anywhere but this
# server. The bundle is served with that address pointing at a file of ours instead.
REDOC_BUNDLE = "redoc.standalone.js"
REDOC_CDN_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
REDOC_LOCAL_LOGO = STATIC_URL + "/redoc-logo.svg"
SHELL_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}

pages = APIRouter(include_in_schema=False)


def static_dir() -> Path:
    return Path(str(files("research_tool.api") / "static"))


def docs_assets_dir() -> Path:
    return Path(str(files("fastapi_offline") / "static"))


def _shell(name: str, policy: str) -> FileResponse:
    headers = {**SHELL_HEADERS, "Content-Security-Policy": policy}
    return FileResponse(static_dir() / name, media_type="text/html; charset=utf-8", headers=headers)


@pages.api_route("/", methods=["GET", "HEAD"])
async def web_page() -> FileResponse:
    return _shell("index.html", PAGE_POLICY)


@pages.get("/docs")
async def swagger_docs() -> FileResponse:
    return _shell("docs.html", DOCS_POLICY)


@pages.get("/redoc")
async def redoc_docs() -> FileResponse:
    return _shell("redoc.html", DOCS_POLICY)


@cache
def redoc_bundle() -> bytes:
    """fastapi-offline's ReDoc bundle with the CDN logo replaced by ours (read and rewritten once)."""
    text = (docs_assets_dir() / REDOC_BUNDLE).read_text(encoding="utf-8")
    return text.replace(REDOC_CDN_LOGO, REDOC_LOCAL_LOGO).encode("utf-8")


@pages.get(f"{DOCS_ASSETS_URL}/{REDOC_BUNDLE}")
async def redoc_script() -> Response:
    body = await asyncio.to_thread(redoc_bundle)
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}
    return Response(body, media_type="text/javascript; charset=utf-8", headers=headers)


def install_pages(app: FastAPI) -> None:
    app.include_router(pages)
    app.mount(DOCS_ASSETS_URL, StaticFiles(directory=docs_assets_dir()), name="docs-assets")
    app.mount(STATIC_URL, StaticFiles(directory=static_dir()), name="static")
