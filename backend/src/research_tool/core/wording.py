"""Counts in sentences a person reads (event messages, the CLI): "1 source", "2 sources", "0 queries"."""

from __future__ import annotations


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`count` and the noun in the form that count takes; `nouns` when the plural is not noun + "s"."""
    return f"{count} {noun if count == 1 else (nouns or noun + 's')}"
