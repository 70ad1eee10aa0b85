"""Optional extras of the package: which import each one provides, and the one-line error when it is missing.

`pip install research-tool` installs the offline engine and every search provider; a model engine needs the
`llm` extra, the Playwright page renderer the `browser` extra. Asking for a feature whose extra is not installed
is bad input (CLI exit 2, API 400 at start), never a `ModuleNotFoundError` in the middle of a session.
"""

from __future__ import annotations

import importlib.util

from research_tool.core.errors import BadInputError

# RESEARCH_LLM's provider -> the module its LangChain chat model comes from (all in the `llm` extra)
LLM_MODULES: dict[str, str] = {
    "ollama": "langchain_ollama",
    "openai": "langchain_openai",
    "anthropic": "langchain_anthropic",
}


class MissingExtraError(BadInputError):
    """A feature was asked for whose optional dependencies are not installed."""

    error_type = "missing_extra"


def install_hint(extra: str) -> str:
    return f"pip install 'research-tool[{extra}]'"


def module_installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require_extra(module: str, extra: str, feature: str) -> None:
    """Raise MissingExtraError naming the extra to install when `module` cannot be imported."""
    if not module_installed(module):
        raise MissingExtraError(f"{feature} needs the '{extra}' extra, which is not installed: {install_hint(extra)}")


def require_llm_extra(provider: str, spec: str) -> None:
    module = LLM_MODULES.get(provider)
    if module is not None:
        require_extra(module, "llm", f"RESEARCH_LLM={spec}")


# the local index's readers (providers/local_corpus/formats.py; docs/documents.md)
DOCUMENTS_MODULES = ("docx", "pptx", "openpyxl", "striprtf", "defusedxml")
OCR_MODULES = ("rapidocr_onnxruntime", "PIL", "numpy")

POSTGRES_MODULES = ("psycopg", "psycopg_pool", "langgraph.checkpoint.postgres")


def require_postgres_extra() -> None:
    """RESEARCH_DATABASE_URL is set: the Postgres driver, pool and checkpointer must be installed."""
    missing = [m for m in POSTGRES_MODULES if not module_installed(m)]
    if missing:
        raise MissingExtraError(
            f"RESEARCH_DATABASE_URL needs the 'postgres' extra, which is not installed: {install_hint('postgres')}"
        )
