"""What the answer reader reads: the question and one candidate sentence with its context, as token ids.

One layout for training (`eval/train_reader.py`) and inference (`reader.py`), so the two can never drift:
`[CLS] question [SEP] sentence [SEP] context [SEP]`, token type 0 for the question part and 1 after it. The
question keeps at most `QUESTION_TOKENS`, the sentence `SENTENCE_TOKENS`, the context (the page's title and the
sentence before, "Title: previous sentence") what is left of `MAX_TOKENS`. Sequences are cut to what they need:
a batch is padded to its longest row only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MAX_TOKENS = 96
QUESTION_TOKENS = 28
SENTENCE_TOKENS = 52
CLS, SEP, PAD = 101, 102, 0  # BERT uncased vocabulary (the packaged all-MiniLM-L6-v2 tokenizer)


@dataclass(frozen=True)
class Passage:
    """One candidate as the reader sees it: the sentence and what stands around it."""

    sentence: str
    context: str = ""


def _pieces(tokenizer: Any, text: str) -> list[int]:
    ids: list[int] = tokenizer.encode(text, add_special_tokens=False).ids
    return ids


def encode_pair(tokenizer: Any, question_ids: list[int], passage: Passage) -> tuple[list[int], list[int]]:
    """(ids, token types) of one question/passage pair, cut to the layout above."""
    sentence = _pieces(tokenizer, passage.sentence)[:SENTENCE_TOKENS]
    head = [CLS, *question_ids[:QUESTION_TOKENS], SEP]
    body = [*sentence, SEP]
    room = MAX_TOKENS - len(head) - len(body) - 1
    context = _pieces(tokenizer, passage.context)[: max(0, room)] if passage.context and room > 2 else []
    if context:
        body += [*context, SEP]
    return head + body, [0] * len(head) + [1] * len(body)


def encode_batch(
    tokenizer: Any, question: str, passages: Sequence[Passage]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(input_ids, token_type_ids, attention_mask), each batch x longest row, for one question's passages."""
    import numpy as np

    question_ids = _pieces(tokenizer, question)
    rows = [encode_pair(tokenizer, question_ids, p) for p in passages]
    width = max((len(ids) for ids, _ in rows), default=1)
    ids = np.full((len(rows), width), PAD, dtype=np.int64)
    types = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, (row, kinds) in enumerate(rows):
        ids[i, : len(row)] = row
        types[i, : len(row)] = kinds
        mask[i, : len(row)] = 1
    return ids, types, mask
