"""How fast a model server evaluates prompts, measured from the engine's own calls and remembered per server
(issue 35), so that the engine never sends a prompt whose evaluation cannot finish before the call's deadline.

Why: llama.cpp's servers check for a closed connection between answer tokens, but a prompt whose evaluation has
begun is evaluated to its end. A call cancelled while its prompt is evaluated keeps the server busy after it
(measured: a 2,021-token prompt at 23 tokens/s, 87 s): streaming cannot stop that; not sending it can.

Measured: the time from sending a call to its first streamed chunk, against the work of evaluating the call's
*new* prompt tokens (estimated at 4 characters a token, as the prediction does; a later token costs more than an
early one: `prompt_work`). New: the part after the longest prefix it shares with the previous prompt sent to
the server, which llama.cpp reuses from its cache (a server without such a cache is measured slower than it is:
the prediction errs careful).
Only a call sent while no other call to the server was waiting for its first chunk, and no cancelled prompt
was still being evaluated, is measured (a queued call's wait is not its evaluation). A call cancelled before
its first chunk shows the server slower than its wait: when that is slower than the estimate, the speed is set
to twice as slow as the wait shows (`UNFINISHED_FACTOR`). Otherwise the speed is the decayed ratio of the
seconds to the work of recent measurements: recent calls weigh most, long prompts more than short ones.

Predicted: the server evaluates one prompt at a time, so a call's prompt is evaluated after the calls still
waiting for their first chunk, and after a cancelled prompt the server is still evaluating; the prediction is
when its own evaluation would end. Without a measurement there is no prediction (the first call is sent as is).

Answers (issue 43): how fast the server writes answer tokens is measured too, from the streamed calls of at least
`MIN_MEASURED_ANSWER_TOKENS` tokens (tokens after the first chunk over the time from the first chunk to the last),
so a call late in the session asks for no more answer tokens than the server can write before the call's
deadline (`answer_cap`): the server stops by itself then, even when the client is too starved of CPU to hang up
on time (an extract sent 5 s before a 90 s deadline streamed 269 tokens past it).

Kept (issue 43): with a data dir, every measurement is written to `<data dir>/model_speeds.json`, and a process
that meets the server again starts from that speed, so a `run`'s first prompt, too, is one the server can
evaluate in the time the call has (before, a fresh process sent its first prompt blind: llama-cpp-python was
still evaluating it 6-9 s after a session ended).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from research_tool.core.logging import get_logger
from research_tool.engines.compaction import estimate_text_tokens

log = get_logger(__name__)

DECAY = 0.5  # the weight the earlier measurements keep at each new one
MIN_MEASURED_TOKENS = 32  # a shorter new prompt measures the server's latency, not its prompt speed
# A token late in a long prompt costs more than an early one (attention looks back at every token before it):
# token i costs 1 + i / CONTEXT_COST_TOKENS. Measured here with llama.cpp and SmolLM2-135M on 2 cores: a
# 2,200-token prompt took 1.4 times as long a token as a 240-token one. A larger model spends relatively less on
# attention, so for it this overestimates long prompts measured on short ones: the careful side.
CONTEXT_COST_TOKENS = 2500.0
# A prompt cancelled before its first chunk had not been evaluated by then: how much longer it takes is unknown,
# so it is taken to need twice the time it had (the next measured call corrects the estimate).
UNFINISHED_FACTOR = 2.0
MIN_MEASURED_ANSWER_TOKENS = 8  # a shorter answer measures the server's latency, not its answer speed
# under the data dir: {server key: {"seconds": s, "work": w, "answer_seconds": s, "answer_tokens": n}}
SPEEDS_FILE = "model_speeds.json"


def shared_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of two strings."""
    end = min(len(a), len(b))
    at = 0
    while at < end:
        stop = min(end, at + 256)
        if a[at:stop] != b[at:stop]:
            while a[at] == b[at]:
                at += 1
            return at
        at = stop
    return end


def prompt_work(cached_tokens: int, new_tokens: int) -> float:
    """The cost of evaluating `new_tokens` after `cached_tokens` already in the server's cache, in units of an
    early token (the sum of 1 + i / CONTEXT_COST_TOKENS over the new tokens' positions i)."""
    middle = cached_tokens + new_tokens / 2
    return new_tokens * (1.0 + middle / CONTEXT_COST_TOKENS)


@dataclass
class _Call:
    new_tokens: int
    work: float
    sent: float
    measured: bool  # sent while nothing else was evaluated: its time to the first chunk is its evaluation
    queued_s: float  # the evaluations predicted ahead of it when it was sent
    predicted_s: float | None  # its own evaluation, as predicted when it was sent


@dataclass
class PromptTiming:
    """One server's prompt-evaluation speed and the calls in flight to it (thread-safe: one per server, shared
    by every session in the process)."""

    key: str = ""
    _seconds: float = 0.0  # decayed sums of the measurements
    _tokens: float = 0.0
    _last_prompt: str = ""
    _pending: dict[int, _Call] = field(default_factory=dict)  # calls without their first chunk yet
    _busy_until: float = 0.0  # a cancelled prompt's evaluation is predicted to end then
    _answer_seconds: float = 0.0  # decayed sums of the answer measurements
    _answer_tokens: float = 0.0
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    store: Path | None = None  # the data dir's SPEEDS_FILE, where measurements are kept across processes

    @property
    def seconds_per_token(self) -> float | None:
        """Seconds an early prompt token takes (a later one takes more: `prompt_work`)."""
        with self._lock:
            return self._seconds / self._tokens if self._tokens > 0 else None

    @property
    def tokens_per_s(self) -> float | None:
        per_token = self.seconds_per_token
        return 1.0 / per_token if per_token else None

    @property
    def answer_tokens_per_s(self) -> float | None:
        """Answer tokens the server writes a second (None: not measured)."""
        with self._lock:
            return self._answer_tokens / self._answer_seconds if self._answer_seconds > 0 else None

    def answer_cap(self, seconds: float) -> int | None:
        """The answer tokens the server writes in `seconds` (at least 1), or None when its speed is not known."""
        speed = self.answer_tokens_per_s
        if speed is None:
            return None
        return max(1, int(speed * max(0.0, seconds)))

    def answered(self, tokens: int, seconds: float) -> None:
        """A call's answer streamed `tokens` tokens in `seconds` after its first chunk (measured from
        `MIN_MEASURED_ANSWER_TOKENS` up)."""
        if tokens < MIN_MEASURED_ANSWER_TOKENS or seconds <= 0:
            return
        with self._lock:
            self._answer_seconds = DECAY * self._answer_seconds + seconds
            self._answer_tokens = DECAY * self._answer_tokens + tokens
        self._keep()
        log.debug("llm_answer_timed", server=self.key, tokens=tokens, seconds=round(seconds, 3))

    def _keep(self) -> None:
        """Write the measurements into the data dir's store (when there is one)."""
        if self.store is None:
            return
        with self._lock:
            kept = KeptSpeed(self._seconds, self._tokens, self._answer_seconds, self._answer_tokens)
        keep_speed(self.store, self.key, kept)

    def new_tokens(self, prompt: str) -> int:
        """The tokens of `prompt` the server has not just evaluated (after the prefix it shares with the last)."""
        return self._split(prompt)[1]

    def _split(self, prompt: str) -> tuple[int, int]:
        """(tokens of the prefix the server has cached, tokens after it) of `prompt`."""
        with self._lock:
            shared = shared_prefix(prompt, self._last_prompt)
        return estimate_text_tokens(prompt[:shared]), estimate_text_tokens(prompt[shared:])

    def work(self, prompt: str) -> float:
        """What evaluating `prompt` now costs the server, in early-token units (`prompt_work`)."""
        return prompt_work(*self._split(prompt))

    def _queue_s(self, now: float) -> float:
        """The evaluation predicted ahead of a call sent now (under the lock)."""
        queued = sum(c.predicted_s or 0.0 for c in self._pending.values())
        return max(0.0, self._busy_until - now) + queued

    def predict(self, prompt: str, now: float | None = None) -> float | None:
        """Seconds from `now` until the server would have evaluated `prompt` sent now, or None (not measured)."""
        per_token = self.seconds_per_token
        if per_token is None:
            return None
        own = self.work(prompt) * per_token
        now = time.monotonic() if now is None else now
        with self._lock:
            return self._queue_s(now) + own

    def sent(self, prompt: str, now: float | None = None) -> int:
        """A call with `prompt` was sent; returns its id for `first_chunk` and `ended`."""
        now = time.monotonic() if now is None else now
        per_token = self.seconds_per_token
        cached, new = self._split(prompt)
        work = prompt_work(cached, new)
        with self._lock:
            queued_s = self._queue_s(now)
            call_id = next(self._ids)
            self._pending[call_id] = _Call(
                new_tokens=new,
                work=work,
                sent=now,
                measured=queued_s <= 0 and not self._pending and new >= MIN_MEASURED_TOKENS,
                queued_s=queued_s,
                predicted_s=work * per_token if per_token is not None else None,
            )
            self._last_prompt = prompt
        return call_id

    def first_chunk(self, call_id: int, now: float | None = None) -> None:
        """The call's first streamed chunk arrived: its prompt is evaluated."""
        now = time.monotonic() if now is None else now
        with self._lock:
            call = self._pending.pop(call_id, None)
            if call is None:
                return
            if call.measured:
                self._observe(now - call.sent, call.work)
        if call.measured:
            self._keep()
        log.debug(
            "llm_prompt_timed",
            server=self.key,
            new_tokens=call.new_tokens,
            seconds=round(now - call.sent, 3),
            predicted_s=None if call.predicted_s is None else round(call.queued_s + call.predicted_s, 3),
            measured=call.measured,
        )

    def ended(self, call_id: int, now: float | None = None, *, cancelled: bool) -> None:
        """The call ended. One `cancelled` before its first chunk leaves the server evaluating its prompt:
        until when is predicted from the speed, which is at least as slow as its wait so far shows. One that
        failed (an HTTP error, a refused form) was not evaluated."""
        now = time.monotonic() if now is None else now
        with self._lock:
            call = self._pending.pop(call_id, None)
            if call is None or not cancelled:
                return
            waited = UNFINISHED_FACTOR * (now - call.sent)
            if call.measured and (self._tokens <= 0 or waited / call.work > self._seconds / self._tokens):
                self._seconds, self._tokens = waited, call.work  # slower than thought
            if self._tokens > 0:
                own = call.work * self._seconds / self._tokens
                self._busy_until = max(self._busy_until, call.sent + call.queued_s + own)

    def _observe(self, seconds: float, work: float) -> None:
        self._seconds = DECAY * self._seconds + seconds
        self._tokens = DECAY * self._tokens + work


_REMEMBERED: dict[str, PromptTiming] = {}
_REMEMBERED_LOCK = threading.Lock()


def server_timing(key: str, data_dir: Path | None = None) -> PromptTiming:
    """The prompt timing of the server `key` (provider, base URL and model): one per process, like its
    structured-output form (`output_format.server_format`), so what one session measured serves the next; with
    `data_dir`, it starts from the speed an earlier process kept there, and keeps its own measurements."""
    store = data_dir / SPEEDS_FILE if data_dir is not None else None
    with _REMEMBERED_LOCK:
        found = _REMEMBERED.get(key)
        if found is None:
            found = _REMEMBERED[key] = PromptTiming(key=key)
            kept = kept_speeds(store).get(key) if store is not None else None
            if kept is not None:
                found._seconds, found._tokens = kept.seconds, kept.work
                found._answer_seconds, found._answer_tokens = kept.answer_seconds, kept.answer_tokens
                log.debug("llm_prompt_speed_loaded", server=key, tokens_per_s=round(kept.work / kept.seconds, 1))
        if store is not None and found.store is None:
            found.store = store
        return found


@dataclass(frozen=True)
class KeptSpeed:
    """One server's decayed measurements as kept in the store: prompt (seconds, work) and answer (seconds,
    tokens; 0 and 0 when not measured)."""

    seconds: float
    work: float
    answer_seconds: float = 0.0
    answer_tokens: float = 0.0


def _positive(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def kept_speeds(store: Path) -> dict[str, KeptSpeed]:
    """The speeds kept in `store`, by server key; nothing when it is missing or unreadable."""
    try:
        raw = json.loads(store.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    speeds: dict[str, KeptSpeed] = {}
    for key, value in raw.items() if isinstance(raw, dict) else ():
        if not isinstance(value, dict):
            continue
        seconds, work = _positive(value.get("seconds")), _positive(value.get("work"))
        if seconds is None or work is None:
            continue
        answer_seconds, answer_tokens = _positive(value.get("answer_seconds")), _positive(value.get("answer_tokens"))
        answer = (answer_seconds, answer_tokens) if answer_seconds and answer_tokens else (0.0, 0.0)
        speeds[str(key)] = KeptSpeed(seconds, work, *answer)
    return speeds


_STORE_LOCK = threading.Lock()


def keep_speed(store: Path, key: str, speed: KeptSpeed) -> None:
    """Write one server's decayed measurements into `store` (written whole, then renamed into place). A server
    whose prompt speed is not measured yet is not written."""
    if speed.seconds <= 0 or speed.work <= 0:
        return
    with _STORE_LOCK:
        speeds = {k: _stored(v) for k, v in kept_speeds(store).items()}
        speeds[key] = _stored(speed)
        partial = store.with_name(f"{store.name}.{os.getpid()}.tmp")
        try:
            partial.write_text(json.dumps(speeds, indent=1, sort_keys=True), encoding="utf-8")
            partial.replace(store)
        except OSError as exc:
            log.debug("llm_prompt_speed_not_kept", store=str(store), error=str(exc))
            with contextlib.suppress(OSError):
                partial.unlink()


def _stored(speed: KeptSpeed) -> dict[str, float]:
    stored = {"seconds": speed.seconds, "work": speed.work}
    if speed.answer_seconds > 0 and speed.answer_tokens > 0:
        stored |= {"answer_seconds": speed.answer_seconds, "answer_tokens": speed.answer_tokens}
    return stored


def forget_timings() -> None:
    """Drop every remembered timing (tests that restart a server on the same address)."""
    with _REMEMBERED_LOCK:
        _REMEMBERED.clear()
