"""Where the evaluation data is: $EVAL_DATA_DIR, else ../shared/eval next to the repository. Tests that need it
skip, saying why, when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def eval_data_dir() -> Path:
    configured = os.environ.get("EVAL_DATA_DIR")
    return Path(configured) if configured else REPO_ROOT.parent / "shared" / "eval"
