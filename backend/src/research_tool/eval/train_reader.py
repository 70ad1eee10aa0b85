"""Fine-tune the answer reader: all-MiniLM-L6-v2 read as a cross-encoder (question and candidate sentence together).

    pip install torch==2.13.0          # the CPU wheel on disk; training only, never a runtime dependency
    python -m research_tool.eval.train_reader --minutes 40

What it trains (docs/answer-reader.md has the why and the figures): the packaged all-MiniLM-L6-v2 weights, frozen,
with low-rank adapters (rank `RANK`) on every linear map of the layers from `FIRST_TUNED_LAYER` up, their
LayerNorms, and a linear head over the mean-pooled last layer. It reads `[CLS] question [SEP] sentence [SEP] title:
sentence before [SEP]` (`reader_inputs.py`) and gives the probability that the sentence answers the question.

Data (fit parts only; nothing of a test part is read):
- SQuAD dev part 2, fit articles (the first 12 of the folder, as `eval/answers.py` splits it);
- SQuAD 2.0 train sample (10 articles; its unanswerable questions are groups with no answering sentence);
- owndocs, the fit folders (`eval/owndocs.FIT_FOLDERS`), unanswerable questions included;
- HotpotQA train100, even questions (the sentence of a supporting page that holds the answer).
Every question is one group: its answering sentence(s) and its hardest other sentences by BM25 (`GROUP` in all);
a share of answerable groups lose their answering sentence and become unanswerable. Loss: binary cross-entropy
over every pair (the probability the engine reads) plus a listwise softmax over each group that has an answer.

Written out: `engines/text/reader_adapters.npz` (float16) and `reader_adapters.json` (its digest, the base weights'
digest, the command, the loss curve). The runtime (`providers/local_corpus/reader.py`) merges the adapters into
the packaged weights and builds an onnxruntime graph; torch is not needed there.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from research_tool.engines.base import NumberedSource
from research_tool.engines.text.candidates import Candidate, build_candidates
from research_tool.engines.text.ranker import bm25_scores
from research_tool.engines.text.sentences import split_sentences
from research_tool.engines.text.tokens import content_stems
from research_tool.eval import owndocs
from research_tool.eval.multihop import DEFAULT_EVAL_DIR
from research_tool.models.entities import SourceResult
from research_tool.providers.local_corpus.formats import read_documents
from research_tool.providers.local_corpus.reader_inputs import Passage, encode_batch

SEED = 20261126
GROUP = 6  # sentences read per question in training
DROP_ANSWER = 0.12  # share of answerable groups whose answering sentence is removed (an unanswerable group)
RANK = 16
FIRST_TUNED_LAYER = 2
SQUAD_FIT_ARTICLES = 12
OUT_DIR = Path(__file__).resolve().parents[1] / "engines" / "text"
ADAPTERS = "reader_adapters.npz"
CARD = "reader_adapters.json"


@dataclass
class Group:
    question: str
    passages: list[Passage]
    labels: list[float]
    origin: str  # squad | squad2 | owndocs | hotpotqa


# --- data -------------------------------------------------------------------------------------------------


def _sources(pages: Sequence[tuple[str, str, str]]) -> list[NumberedSource]:
    """(url, title, text) pages as the numbered sources the engine reads."""
    return [
        NumberedSource(
            n=i, source=SourceResult(url=url, title=title, snippet=text[:200], source_name="local", full_content=text)
        )
        for i, (url, title, text) in enumerate(pages, start=1)
    ]


def _pool(pages: Sequence[tuple[str, str, str]]) -> list[Candidate]:
    return [c for d in build_candidates(_sources(pages)) for c in d.candidates]


def _group(
    question: str, pool: Sequence[Candidate], positive: set[int], origin: str, rng: random.Random
) -> Group | None:
    """The question's positives and its hardest negatives by BM25 (one random one among them), GROUP in all."""
    if not pool:
        return None
    scores = bm25_scores(content_stems(question), [c.terms for c in pool])
    order = sorted(range(len(pool)), key=lambda i: -scores[i])
    negatives = [i for i in order if i not in positive]
    keep_positive = sorted(positive)[:2]
    if keep_positive and rng.random() < DROP_ANSWER:
        keep_positive = []
    hard = negatives[: GROUP - len(keep_positive) - 1]
    rest = negatives[len(hard) :]
    if rest:
        hard.append(rng.choice(rest))
    chosen = keep_positive + hard
    rng.shuffle(chosen)
    return Group(
        question,
        [Passage(pool[i].statement, pool[i].reader_context) for i in chosen],
        [1.0 if i in positive else 0.0 for i in chosen],
        origin,
    )


def squad_groups(path: Path, articles: slice, origin: str, rng: random.Random) -> list[Group]:
    """One group per question; the positive is the sentence holding the gold answer's first character."""
    data = json.loads(path.read_text(encoding="utf-8"))["data"][articles]
    groups: list[Group] = []
    for a, article in enumerate(data):
        title = article["title"].replace("_", " ")
        pages = [(f"p{a}-{p}", title, para["context"]) for p, para in enumerate(article["paragraphs"])]
        pool = _pool(pages)
        by_page: dict[str, list[int]] = {}
        for i, c in enumerate(pool):
            by_page.setdefault(c.url, []).append(i)
        for p, para in enumerate(article["paragraphs"]):
            sentences = split_sentences(para["context"])
            for qa in para["qas"]:
                positive: set[int] = set()
                for answer in qa.get("answers", [])[:1]:
                    start = answer["answer_start"]
                    holding = next((s for s in sentences if s.start <= start < s.end), None)
                    if holding is None:
                        continue
                    said = " ".join(holding.text.split())
                    positive |= {
                        i
                        for i in by_page.get(f"p{a}-{p}", [])
                        if pool[i].statement in said or said in pool[i].statement
                    }
                if qa.get("answers") and not positive:
                    continue  # its sentence is no candidate (not declarative): nothing to learn from
                group = _group(qa["question"], pool, positive, origin, rng)
                if group is not None:
                    groups.append(group)
    return groups


def owndocs_groups(folder: Path, names: Sequence[str], rng: random.Random) -> list[Group]:
    groups: list[Group] = []
    for own in owndocs.load_folders(folder):
        if own.name not in names:
            continue
        pages = []
        for relative, text in own.files.items():
            for doc in read_documents(Path(relative), text.encode("utf-8")):
                pages.append((f"{own.name}/{relative}", doc.title, doc.text))
        pool = _pool(pages)
        for q in own.questions:
            positive = (
                {i for i, c in enumerate(pool) if owndocs.sentence_matches(c.statement, q.sentence)}
                if q.sentence
                else set()
            )
            if q.kind != "unanswerable" and not positive:
                continue
            group = _group(q.question, pool, positive, "owndocs", rng)
            if group is not None:
                groups.append(group)
    return groups


def hotpot_groups(folder: Path, rng: random.Random) -> list[Group]:
    raw = json.loads((folder / "hipporag_hotpotqa_train100.json").read_text(encoding="utf-8"))
    groups: list[Group] = []
    for q in raw[0::2]:  # the even questions: eval/answers.py's fit part
        answer = q["answer"]
        if answer.casefold() in ("yes", "no"):
            continue
        pages = [(title, title, " ".join(sentences)) for title, sentences in q["context"]]
        pool = _pool(pages)
        gold_pages = {title for title, _ in q["supporting_facts"]}
        positive = {
            i for i, c in enumerate(pool) if c.url in gold_pages and answer.casefold() in c.statement.casefold()
        }
        if positive:
            group = _group(q["question"], pool, positive, "hotpotqa", rng)
            if group is not None:
                groups.append(group)
    return groups


def pool_groups(
    pools_file: Path,
    eval_dir: Path,
    work_dir: Path,
    rng: random.Random,
    *,
    hold_folders: Sequence[str] = (),
    hold_squad_articles: int = 0,
) -> list[Group]:
    """Groups from the runner's own candidate pools (`eval.answers --capture` on the fit parts): the sentences the
    reader reads at run time (the lexical ranker's best `READ_TOP`), so its negatives are the ones it must beat
    there. Fit questions only; a fold's held-out folders and articles (and SQuAD's unanswerable questions, whose
    articles are not indexed) are left out."""
    from research_tool.engines.text.answering import rank_candidates
    from research_tool.engines.text.question_intent import classify_question
    from research_tool.eval.answers import load_owndocs, load_squad
    from research_tool.eval.fit_reader_mix import READ_TOP, labelled

    first_held = SQUAD_FIT_ARTICLES - hold_squad_articles
    items = {}
    for answer_set in (
        load_owndocs(eval_dir / "owndocs", work_dir),
        load_squad(eval_dir / "squad_dev_part2", work_dir),
    ):
        for item in answer_set.items:  # the fit part only
            if answer_set.name == "owndocs" and item.corpus is not None and item.corpus.name in hold_folders:
                continue
            held = not item.gold_docs or any(int(doc[1:3]) >= first_held for doc in item.gold_docs)
            if answer_set.name == "squad" and hold_squad_articles and held:
                continue
            items[item.question] = (answer_set.name, item)
    pools = json.loads(pools_file.read_text(encoding="utf-8"))
    groups: list[Group] = []
    for question, raw in pools.items():
        if question not in items:
            continue
        name, item = items[question]
        if item.kind == "yes_no":
            continue  # its sentence is labelled by the verdict, not the gold sentence
        sources = [NumberedSource.model_validate(s) for s in raw]
        read = sorted(
            rank_candidates(classify_question(question), build_candidates(sources)),
            key=lambda c: (-c.score, c.n, c.index),
        )[:READ_TOP]
        labels = [labelled(item, c.statement) for c in read]
        if item.kind != "unanswerable" and not any(labels):
            continue  # the answer is not among the read: nothing to rank
        positive = [i for i, x in enumerate(labels) if x][:2]
        negatives = [i for i, x in enumerate(labels) if not x]  # best first, as the ranker ordered them
        chosen = positive + negatives[: GROUP - len(positive)]
        rng.shuffle(chosen)
        groups.append(
            Group(
                question,
                [Passage(read[i].statement, read[i].reader_context) for i in chosen],
                [1.0 if labels[i] else 0.0 for i in chosen],
                f"pools-{name}",
            )
        )
    return groups


def fit_groups(
    eval_dir: Path,
    rng: random.Random,
    squad_questions: int,
    *,
    hold_folders: Sequence[str] = (),
    hold_squad_articles: int = 0,
    owndocs_weight: int = 3,
) -> list[Group]:
    """Every fit group, SQuAD's two sets sampled to `squad_questions` each (2 CPU cores train ~5 pairs a second).

    A fold (choosing the recipe) leaves out the owndocs fit folders `hold_folders` and the last
    `hold_squad_articles` SQuAD fit articles, so that a candidate can be measured on fit data it never saw."""
    unknown = set(hold_folders) - set(owndocs.FIT_FOLDERS)
    if unknown:
        raise ValueError(f"not owndocs fit folders: {', '.join(sorted(unknown))}")
    squad = squad_groups(
        next((eval_dir / "squad_dev_part2").glob("*.json")),
        slice(0, SQUAD_FIT_ARTICLES - hold_squad_articles),
        "squad",
        rng,
    )
    squad2 = squad_groups(eval_dir / "squad2_train_sample" / "train-v2.0-first10.json", slice(None), "squad2", rng)
    groups = rng.sample(squad, min(len(squad), squad_questions)) + rng.sample(squad2, min(len(squad2), squad_questions))
    names = [name for name in owndocs.FIT_FOLDERS if name not in hold_folders]
    groups += owndocs_groups(eval_dir / "owndocs", names, rng) * owndocs_weight  # the kind we answer most
    groups += hotpot_groups(eval_dir / "hotpotqa_train100", rng)
    return groups


# --- model ------------------------------------------------------------------------------------------------


def build_model(weights: dict[str, Any], layers: int) -> Any:
    """MiniLM (BERT, 12 heads) in torch from the packaged weights, frozen, with adapters and a head."""
    import torch
    from torch import nn

    heads, hidden = 12, 384

    class LoRALinear(nn.Module):  # type: ignore[misc]
        def __init__(self, name: str, tuned: bool) -> None:
            super().__init__()
            w = torch.tensor(weights[f"{name}.weight"])
            self.register_buffer("weight", w)
            self.register_buffer("bias", torch.tensor(weights[f"{name}.bias"]))
            self.name = name
            self.tuned = tuned
            if tuned:
                out_f, in_f = w.shape
                self.lora_a = nn.Parameter(torch.randn(RANK, in_f) / math.sqrt(in_f))
                self.lora_b = nn.Parameter(torch.zeros(out_f, RANK))

        def forward(self, x: Any) -> Any:
            y = nn.functional.linear(x, self.weight, self.bias)
            if self.tuned:
                y = y + (x @ self.lora_a.t()) @ self.lora_b.t()
            return y

    class LayerNorm(nn.Module):  # type: ignore[misc]
        def __init__(self, name: str, tuned: bool) -> None:
            super().__init__()
            self.name = name
            gamma, beta = torch.tensor(weights[f"{name}.weight"]), torch.tensor(weights[f"{name}.bias"])
            self.weight = nn.Parameter(gamma, requires_grad=tuned)
            self.bias = nn.Parameter(beta, requires_grad=tuned)
            self.trained_norm = tuned

        def forward(self, x: Any) -> Any:
            return nn.functional.layer_norm(x, (hidden,), self.weight, self.bias, 1e-12)

    class Layer(nn.Module):  # type: ignore[misc]
        def __init__(self, i: int) -> None:
            super().__init__()
            p, tuned = f"encoder.layer.{i}.", i >= FIRST_TUNED_LAYER
            self.q = LoRALinear(p + "attention.self.query", tuned)
            self.k = LoRALinear(p + "attention.self.key", tuned)
            self.v = LoRALinear(p + "attention.self.value", tuned)
            self.o = LoRALinear(p + "attention.output.dense", tuned)
            self.ln1 = LayerNorm(p + "attention.output.LayerNorm", tuned)
            self.up = LoRALinear(p + "intermediate.dense", tuned)
            self.down = LoRALinear(p + "output.dense", tuned)
            self.ln2 = LayerNorm(p + "output.LayerNorm", tuned)

        def forward(self, x: Any, key_bias: Any) -> Any:
            b, t, _ = x.shape

            def split(y: Any) -> Any:
                return y.view(b, t, heads, hidden // heads).transpose(1, 2)

            scores = split(self.q(x)) @ split(self.k(x)).transpose(-1, -2) / math.sqrt(hidden // heads)
            context = (scores + key_bias).softmax(-1) @ split(self.v(x))
            x = self.ln1(self.o(context.transpose(1, 2).reshape(b, t, hidden)) + x)
            return self.ln2(self.down(nn.functional.gelu(self.up(x))) + x)

    class Reader(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("words", torch.tensor(weights["embeddings.word_embeddings.weight"]))
            self.register_buffer("positions", torch.tensor(weights["embeddings.position_embeddings.weight"]))
            self.register_buffer("types", torch.tensor(weights["embeddings.token_type_embeddings.weight"]))
            self.ln = LayerNorm("embeddings.LayerNorm", False)
            self.layers = nn.ModuleList([Layer(i) for i in range(layers)])
            self.head = nn.Linear(hidden, 1)
            nn.init.zeros_(self.head.weight)
            nn.init.zeros_(self.head.bias)

        def forward(self, ids: Any, types: Any, mask: Any) -> Any:
            t = ids.shape[1]
            x = self.ln(self.words[ids] + self.positions[:t] + self.types[types])
            key_bias = ((1.0 - mask.float()) * -1e9)[:, None, None, :]
            for layer in self.layers:
                x = layer(x, key_bias)
            m = mask.float()[:, :, None]
            pooled = (x * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return self.head(pooled).squeeze(-1)

    return Reader()


def load_tuned(model: Any, adapters: Path) -> int:
    """Start from trained adapters (`tuned_arrays`' names, as shipped): the count of tensors set."""
    import numpy as np
    import torch

    with np.load(adapters) as stored:
        arrays = {k: np.asarray(stored[k], np.float32) for k in stored.files}
    set_count = 0
    with torch.no_grad():
        for module in model.modules():
            name = getattr(module, "name", None)
            if name is None:
                continue
            if getattr(module, "tuned", False):
                module.lora_a.copy_(torch.tensor(arrays[f"{name}.lora_a"]))
                module.lora_b.copy_(torch.tensor(arrays[f"{name}.lora_b"]))
                set_count += 2
            if getattr(module, "trained_norm", False):
                module.weight.copy_(torch.tensor(arrays[f"{name}.weight"]))
                module.bias.copy_(torch.tensor(arrays[f"{name}.bias"]))
                set_count += 2
        model.head.weight.copy_(torch.tensor(arrays["head.weight"]).reshape(1, -1))
        model.head.bias.copy_(torch.tensor(arrays["head.bias"]).reshape(-1))
    return set_count + 2


def tuned_arrays(model: Any) -> dict[str, Any]:
    """The trained tensors by name: each tuned layer's adapters and LayerNorms, and the head."""
    import numpy as np

    out: dict[str, Any] = {}
    for module in model.modules():
        name = getattr(module, "name", None)
        if name is None:
            continue
        if getattr(module, "tuned", False):
            out[f"{name}.lora_a"] = module.lora_a.detach().numpy()
            out[f"{name}.lora_b"] = module.lora_b.detach().numpy()
        if getattr(module, "trained_norm", False):
            out[f"{name}.weight"] = module.weight.detach().numpy()
            out[f"{name}.bias"] = module.bias.detach().numpy()
    out["head.weight"] = model.head.weight.detach().numpy()[0]
    out["head.bias"] = model.head.bias.detach().numpy()
    return {k: np.asarray(v, np.float32) for k, v in out.items()}


# --- training ---------------------------------------------------------------------------------------------


def batches(groups: list[Group], per_batch: int, rng: random.Random) -> Iterator[list[Group]]:
    order = list(range(len(groups)))
    while True:
        rng.shuffle(order)
        for i in range(0, len(order) - per_batch + 1, per_batch):
            yield [groups[j] for j in order[i : i + per_batch]]


def group_loss(model: Any, tokenizer: Any, chunk: list[Group]) -> Any:
    """BCE over every pair plus a listwise softmax over each group holding an answer."""
    import numpy as np
    import torch

    rows = [encode_batch(tokenizer, g.question, g.passages) for g in chunk]
    width = max(r[0].shape[1] for r in rows)

    def padded(k: int) -> Any:
        return torch.tensor(np.concatenate([np.pad(r[k], ((0, 0), (0, width - r[k].shape[1]))) for r in rows]))

    logits = model(padded(0), padded(1), padded(2))
    labels = torch.tensor([x for g in chunk for x in g.labels])
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)
    listwise = []
    at = 0
    for g in chunk:
        part, gold = logits[at : at + len(g.labels)], labels[at : at + len(g.labels)]
        at += len(g.labels)
        if gold.sum() > 0:
            listwise.append(-(torch.log_softmax(part, 0) * gold / gold.sum()).sum())
    if listwise:
        loss = loss + 0.5 * torch.stack(listwise).mean()
    return loss


def evaluate(model: Any, tokenizer: Any, groups: list[Group]) -> dict[str, float]:
    """Top-1 accuracy over groups holding an answer, and mean loss, on held-out fit groups."""
    import torch

    right = total = 0
    losses = []
    with torch.no_grad():
        for g in groups:
            losses.append(float(group_loss(model, tokenizer, [g])))
            if sum(g.labels):
                ids, types, mask = (torch.tensor(a) for a in encode_batch(tokenizer, g.question, g.passages))
                scores = model(ids, types, mask)
                right += int(g.labels[int(scores.argmax())] > 0)
                total += 1
    return {"top1": right / max(1, total), "loss": sum(losses) / max(1, len(losses))}


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m research_tool.eval.train_reader")
    parser.add_argument("--eval-dir", type=Path, default=DEFAULT_EVAL_DIR)
    parser.add_argument("--minutes", type=float, default=40.0, help="training time budget (data prep not counted)")
    parser.add_argument("--batch", type=int, default=4, help="questions per step (x GROUP sentences)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the machine is shared)")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    parser.add_argument("--max-steps", type=int, default=0, help="stop after N steps (0: the time budget)")
    parser.add_argument("--squad-questions", type=int, default=1000, help="sampled from each SQuAD set")
    parser.add_argument("--held-out", type=int, default=300, help="fit groups kept out of training, to watch")
    parser.add_argument("--init", type=Path, help="start from these adapters (a .npz as shipped) instead of zero")
    parser.add_argument("--owndocs-weight", type=int, default=3, help="times each owndocs fit group is repeated")
    parser.add_argument(
        "--hold-folders", default="", help="owndocs fit folders left out (a fold, to choose the recipe), by comma"
    )
    parser.add_argument("--hold-squad-articles", type=int, default=0, help="the last N SQuAD fit articles left out")
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=Path("data/reader_train/checkpoint.pt"),
        help="written every --checkpoint-every seconds (trainable tensors, optimiser, step, clock, loss curve)",
    )
    parser.add_argument("--checkpoint-every", type=float, default=180.0)
    parser.add_argument("--resume", action="store_true", help="continue the run saved in --checkpoint")
    parser.add_argument("--log", type=Path, help="append each loss point (JSON lines) to this file")
    parser.add_argument(
        "--pools", type=Path, help="add groups from the runner's captured fit pools (eval.answers --capture)"
    )
    parser.add_argument("--pools-weight", type=int, default=3, help="times each pool group is repeated")
    parser.add_argument("--work-dir", type=Path, default=Path("data/eval"), help="eval.answers' work dir (--pools)")
    args = parser.parse_args(argv)
    try:
        import numpy as np
        import torch
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer
    except ImportError as exc:
        print(f"train_reader needs torch (pip install torch==2.13.0) and the semantic extra: {exc}", file=sys.stderr)
        return 2
    from research_tool.providers.local_corpus.embeddings import find_model_files

    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    rng = random.Random(SEED)
    files = find_model_files(allow_download=False)
    weights = dict(load_file(str(files.weights)))
    layers = 1 + max(int(k.split(".")[2]) for k in weights if k.startswith("encoder.layer."))
    tokenizer = Tokenizer.from_file(str(files.tokenizer))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    started = time.perf_counter()
    hold = tuple(name for name in args.hold_folders.split(",") if name)
    groups = fit_groups(
        args.eval_dir,
        rng,
        args.squad_questions,
        hold_folders=hold,
        hold_squad_articles=args.hold_squad_articles,
        owndocs_weight=args.owndocs_weight,
    )
    if args.pools is not None:
        groups += args.pools_weight * pool_groups(
            args.pools,
            args.eval_dir,
            args.work_dir,
            rng,
            hold_folders=hold,
            hold_squad_articles=args.hold_squad_articles,
        )
    rng.shuffle(groups)
    held = [g for g in groups if g.origin in ("squad", "owndocs")][: args.held_out]
    held_ids = {id(g) for g in held}
    train = [g for g in groups if id(g) not in held_ids]
    counts: dict[str, int] = {}
    for g in train:
        counts[g.origin] = counts.get(g.origin, 0) + 1
    print(f"groups: {counts}, held out {len(held)}; data {time.perf_counter() - started:.0f} s", flush=True)
    model = build_model(weights, layers)
    started_from: dict[str, Any] | None = None
    if args.init is not None:
        print(f"started from {args.init} ({load_tuned(model, args.init)} tensors)", flush=True)
        init_card = args.init.with_suffix(".json")
        earlier = json.loads(init_card.read_text(encoding="utf-8")) if init_card.is_file() else {}
        started_from = {  # the run it continues, as its card gave it (read now: --out may overwrite it)
            "adapters_sha256": file_digest(args.init),
            **{k: earlier[k] for k in ("command", "steps", "train_seconds", "loss_curve") if k in earlier},
        }
    params = [p for p in model.parameters() if p.requires_grad]
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    print(f"trainable parameters: {sum(p.numel() for p in params):,}", flush=True)
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    budget = args.minutes * 60
    curve: list[dict[str, float]] = []
    step = 0
    before = 0.0  # training seconds of the run's earlier legs (a resumed run)
    if args.resume:
        saved = torch.load(args.checkpoint, weights_only=False)
        with torch.no_grad():
            for name, p in zip(names, params, strict=True):
                p.copy_(saved["trainable"][name])
        optimizer.load_state_dict(saved["optimizer"])
        step, before, curve = saved["step"], saved["seconds"], saved["curve"]
        torch.set_rng_state(saved["torch_rng"])
        print(f"resumed {args.checkpoint} at step {step} ({before:.0f} s)", flush=True)

    def rate(elapsed: float, step: int) -> float:
        """Warm up over the first 5% of the budget (time or steps), then fall linearly to a tenth."""
        done = float(step / args.max_steps if args.max_steps else elapsed / budget)
        peak = float(args.lr)
        return peak * (done / 0.05 if done < 0.05 else 1.0 - 0.9 * min(1.0, (done - 0.05) / 0.95))

    def save_checkpoint(seconds: float) -> None:
        args.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        partial = args.checkpoint.with_suffix(".partial")
        torch.save(
            {
                "trainable": {n: p.detach().clone() for n, p in zip(names, params, strict=True)},
                "optimizer": optimizer.state_dict(),
                "step": step,
                "seconds": seconds,
                "curve": curve,
                "torch_rng": torch.get_rng_state(),
            },
            partial,
        )
        partial.replace(args.checkpoint)  # atomic: a crash mid-write leaves the last checkpoint whole

    train_start = time.perf_counter() - before
    last_saved = time.perf_counter()
    window: list[float] = []
    model.train()
    order = batches(train, args.batch, rng)
    for _ in range(step):  # a resumed run sees the batches it would have seen
        next(order)
    for chunk in order:
        if (args.max_steps and step >= args.max_steps) or time.perf_counter() - train_start >= budget:
            break
        for g in optimizer.param_groups:
            g["lr"] = rate(time.perf_counter() - train_start, step)
        loss = group_loss(model, tokenizer, chunk)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        window.append(float(loss.detach()))
        elapsed = time.perf_counter() - train_start
        if step % 25 == 0:
            curve.append({"step": step, "seconds": round(elapsed), "train_loss": round(sum(window) / len(window), 4)})
            window = []
            print(json.dumps(curve[-1]), flush=True)
            if args.log is not None:
                with args.log.open("a", encoding="utf-8") as log_file:
                    log_file.write(json.dumps(curve[-1]) + "\n")
        if time.perf_counter() - last_saved >= args.checkpoint_every:
            save_checkpoint(elapsed)
            last_saved = time.perf_counter()
    train_seconds = time.perf_counter() - train_start
    save_checkpoint(train_seconds)
    model.eval()
    held_figures = evaluate(model, tokenizer, held)
    print(f"held-out fit groups: {held_figures}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    arrays = tuned_arrays(model)
    target = args.out / ADAPTERS
    np.savez_compressed(target, **{k: v.astype(np.float16) for k, v in arrays.items()})
    card = {
        "what": "answer-reader adapters over the packaged all-MiniLM-L6-v2 (research_tool.eval.train_reader)",
        "command": "python -m research_tool.eval.train_reader " + " ".join(argv if argv is not None else sys.argv[1:]),
        "adapters_sha256": file_digest(target),
        "base_weights_sha256": file_digest(files.weights),
        "rank": RANK,
        "first_tuned_layer": FIRST_TUNED_LAYER,
        "layers": layers,
        "steps": step,
        "train_seconds": round(train_seconds),
        "started_from": started_from,
        "groups": counts,
        "held_out_folders": list(hold),
        "held_out_squad_articles": args.hold_squad_articles,
        "held_out": held_figures,
        "loss_curve": curve,
    }
    (args.out / CARD).write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {target} ({target.stat().st_size / 1e6:.2f} MB) after {step} steps", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
