"""The shape of free-form JSON a client sent (metadata, inputs): how deeply it nests, checked without recursion."""

from __future__ import annotations

from typing import Any


def json_depth(value: Any, limit: int) -> int:
    """How deeply `value` nests (a scalar: 0), counting no further than limit + 1; iterative."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            if depth > limit:
                return deepest
            stack.extend((child, depth) for child in (item.values() if isinstance(item, dict) else item))
    return deepest
