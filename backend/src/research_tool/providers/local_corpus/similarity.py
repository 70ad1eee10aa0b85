"""The answer ranker's sentence similarity from the `semantic` extra's encoder (`embeddings.py`).

The engines load no model (they may not import providers): `EncoderSimilarity` is handed to them as a
`ranker.SentenceSimilarity` (the graph's synthesis step passes it in `SynthesisInput.similarity` when
`RESEARCH_SEMANTIC_SEARCH` is on and the encoder is here). It holds no state, so it pickles to the CPU
pool's worker processes; each process loads the encoder once (`load_encoder`) and keeps the vectors of the
texts it encoded last (`CACHED_TEXTS`): a question asked again and the sentences of pages read again are not
encoded twice.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from research_tool.core.logging import get_logger
from research_tool.providers.local_corpus.embeddings import load_encoder, unavailable_reason

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = get_logger(__name__)

CACHED_TEXTS = 4096
_cache: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
_lock = threading.Lock()


def _vectors(texts: Sequence[str]) -> list[npt.NDArray[np.float32]]:
    """Unit vectors of `texts`, encoding only those not cached (in one batch)."""
    with _lock:
        found = {t: _cache[t] for t in texts if t in _cache}
        for text in found:
            _cache.move_to_end(text)
    missing = [t for t in dict.fromkeys(texts) if t not in found]
    if missing:
        encoded = load_encoder(allow_download=False).encode(missing)
        found.update(zip(missing, encoded, strict=True))
        with _lock:
            _cache.update(zip(missing, encoded, strict=True))
            while len(_cache) > CACHED_TEXTS:
                _cache.popitem(last=False)
    return [found[t] for t in texts]


class EncoderSimilarity:
    """(question, sentences) -> the cosine of the question with each sentence (a `ranker.SentenceSimilarity`)."""

    def __call__(self, question: str, sentences: Sequence[str]) -> list[float]:
        if not sentences:
            return []
        question_vector, *vectors = _vectors([question, *sentences])
        return [float(v @ question_vector) for v in vectors]


def answer_similarity(enabled: bool) -> EncoderSimilarity | None:
    """The similarity for the answer ranker when `enabled` and the extra and its weights are here, else None
    (the lexical ranker; the reason is logged)."""
    if not enabled or _unavailable() is not None:
        return None
    return EncoderSimilarity()


@lru_cache(maxsize=1)
def _unavailable() -> str | None:
    """Why the encoder cannot run here (looked up and logged once per process), or None."""
    reason = unavailable_reason(allow_download=False)
    if reason is not None:
        log.warning("answer_similarity_unavailable", reason=reason)
    return reason
