"""`python -m research_tool.eval` (`make eval`): every evaluation whose data is present.

Reads ../shared/eval (or EVAL_DATA_DIR): SciFact retrieval (nDCG@10 on train and test, BM25 and, with the
`semantic` extra, BM25 mixed with the sentence encoder), answer quality (SQuAD, HotpotQA, the
how-to set over the demo corpus and MuSiQue, each figure beside its target and the simple baseline), then multi-hop
evidence on HotpotQA and MuSiQue (simple and standard tiers) with citation precision, time and provider calls.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from research_tool.eval import answers, multihop, scifact, semantic


def main() -> int:
    eval_dir = Path(os.environ.get("EVAL_DATA_DIR", str(multihop.DEFAULT_EVAL_DIR)))
    status = 0
    scifact_dir = eval_dir / "scifact"
    if (scifact_dir / "corpus.jsonl").exists():
        status |= scifact.main([str(scifact_dir)])
        status |= scifact.main([str(scifact_dir), "--qrels", "test"])
        # BM25 mixed with the sentence encoder (the `semantic` extra; skipped, saying why, without it)
        status |= semantic.main([str(scifact_dir)])
    else:
        print(f"skipped SciFact: no data in {scifact_dir}", file=sys.stderr)
    for part in ("fit", "test"):  # the answer reader's figures, and today's lexical ranker's beside them
        status |= answers.main(["--eval-dir", str(eval_dir), "--part", part, "--lexical-beside"])
    status |= multihop.main(["--eval-dir", str(eval_dir)])
    return status


if __name__ == "__main__":
    raise SystemExit(main())
