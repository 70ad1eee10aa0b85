"""The worker process that encodes a local index's pending documents (hybrid.HybridIndex.index_folder).

    python -m research_tool.providers.local_corpus.embed_worker [--shard=I/N] DB_PATH COLLECTION [COLLECTION ...]

With --shard=I/N it encodes only the pending documents whose id is I modulo N (N workers share one run).

Writes one JSON object a line on stdout: {"collection", "done", "total"} as it goes, then {"collection", "stats"}.
"""

from __future__ import annotations

import sys

from research_tool.providers.local_corpus.hybrid import worker_main

if __name__ == "__main__":
    raise SystemExit(worker_main(sys.argv[1:]))
