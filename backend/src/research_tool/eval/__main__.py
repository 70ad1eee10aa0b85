"""`python -m research_tool.eval` (`make eval`): every evaluation whose data is present."""

from __future__ import annotations

import sys

from research_tool.eval import scifact


def main() -> int:
    if not (scifact.DEFAULT_DATA_DIR / "corpus.jsonl").exists():
        print(f"skipped SciFact: no data in {scifact.DEFAULT_DATA_DIR}", file=sys.stderr)
        return 0
    return scifact.main([])


if __name__ == "__main__":
    raise SystemExit(main())
