"""Batching: static, dynamic and continuous batching of greedy requests on a step clock.

The reference solution. Time is counted in steps and every model call is one step; a step in
which nothing can run passes idle. Every strategy decodes greedily, and each request's tokens
equal decoding it alone, up to its first stop token (level 5: kept, and the request is done).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import torch

from grading.model import SequenceCache


@dataclass(frozen=True)
class Request:
    id: int
    prompt: list[int]
    max_new_tokens: int
    arrival: int = 0
    stop: tuple[int, ...] = ()  # stop token ids: the completion ends at the first one generated


@dataclass
class Completion:
    id: int
    tokens: list[int]  # the new tokens only, ending at the first stop token if one came out
    arrival: int
    first_token: int  # the step whose call produced the first new token
    finished: int  # the step whose call produced the last new token


@dataclass(eq=False)
class _Sequence:
    """One request on its way through the batcher."""

    request: Request
    order: int  # its position in `requests`: ties in arrival are served in this order
    generated: list[int] = field(default_factory=list)
    cache: SequenceCache | None = None
    first_token: int | None = None
    finished: int | None = None

    @property
    def key(self) -> tuple[int, int]:
        return (self.request.arrival, self.order)

    @property
    def cached(self) -> int:
        return 0 if self.cache is None else self.cache.seq_len

    @property
    def pending(self) -> list[int]:
        """Tokens whose keys and values the next token needs but the cache lacks."""
        return (self.request.prompt + self.generated)[self.cached :]

    @property
    def done(self) -> bool:
        """It has max_new_tokens tokens, or its newest is a stop token (nothing follows one)."""
        return len(self.generated) == self.request.max_new_tokens or (
            bool(self.generated) and self.generated[-1] in self.request.stop
        )


# ----------------------------------------------------------------------------------------------
# Checks shared by the three strategies


def _check_size(name: str, value, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {value!r}")


def _sequences(model, requests) -> list[_Sequence]:
    """The requests as Sequences, sorted by arrival (ties: order in `requests`), checked."""
    config, seen = model.config, set()
    for i, r in enumerate(requests):
        where = f"requests[{i}] (id {r.id})"
        if r.id in seen:
            raise ValueError(f"{where}: duplicate id {r.id}; ids must be unique")
        seen.add(r.id)
        if len(r.prompt) == 0:
            raise ValueError(f"{where}: prompt is empty; it needs at least one token")
        if not all(type(t) is int and 0 <= t < config.vocab_size for t in r.prompt):
            raise ValueError(
                f"{where}: prompt tokens must be Python ints in 0..{config.vocab_size - 1}"
            )
        if not isinstance(r.stop, (tuple, list)) or not all(
            type(t) is int and t in range(config.vocab_size) for t in r.stop
        ):
            raise ValueError(
                f"{where}: stop must be a tuple of Python ints in 0..{config.vocab_size - 1}, "
                f"got {r.stop!r:.80}"
            )
        _check_size(f"{where}: max_new_tokens", r.max_new_tokens)
        _check_size(f"{where}: arrival", r.arrival, 0)
        if len(r.prompt) + r.max_new_tokens - 1 > config.max_seq_len:
            raise ValueError(
                f"{where}: prompt of {len(r.prompt)} tokens + max_new_tokens {r.max_new_tokens} "
                f"- 1 exceeds the model's max_seq_len {config.max_seq_len}"
            )
    return sorted((_Sequence(r, i) for i, r in enumerate(requests)), key=lambda s: s.key)


def _completions(seqs: list[_Sequence]) -> list[Completion]:
    """In the order of `requests`."""
    return [
        Completion(s.request.id, s.generated, s.request.arrival, s.first_token, s.finished)
        for s in sorted(seqs, key=lambda s: s.order)
    ]


# ----------------------------------------------------------------------------------------------
# One step: one model call


@torch.no_grad()
def _run_step(model, batch: list[tuple[_Sequence, int]], step: int) -> None:
    """Feed each sequence its next n pending tokens in one call; take the tokens that come out."""
    device = next(model.parameters()).device
    for seq, _ in batch:
        if seq.cache is None:
            seq.cache = SequenceCache(model.config)
    rows = [torch.tensor(seq.pending[:n], device=device) for seq, n in batch]
    logits = model.forward_batch(rows, [seq.cache for seq, _ in batch])  # B x (n, vocab)
    ready = [(seq, out[-1]) for (seq, _), out in zip(batch, logits, strict=True) if not seq.pending]
    if not ready:
        return
    next_ids = torch.stack([last for _, last in ready]).argmax(dim=-1).tolist()  # greedy
    for (seq, _), token in zip(ready, next_ids, strict=True):
        seq.generated.append(token)
        if seq.first_token is None:
            seq.first_token = step
        if seq.done:
            seq.finished = step


def _run_to_completion(model, group: list[_Sequence], step: int) -> int:
    """Run a fixed batch from `step` until every member is done; return the next free step."""
    while not all(s.done for s in group):
        _run_step(model, [(s, len(s.pending)) for s in group if not s.done], step)
        step += 1
    return step


# ----------------------------------------------------------------------------------------------
# Level 1: static batching


def static_batching(model, requests, batch_size) -> list[Completion]:
    _check_size("batch_size", batch_size)
    queue = _sequences(model, requests)
    step = 0
    for start in range(0, len(queue), batch_size):
        group = queue[start : start + batch_size]
        step = max(step, max(s.request.arrival for s in group))  # wait for the last member
        step = _run_to_completion(model, group, step)
    return _completions(queue)


# ----------------------------------------------------------------------------------------------
# Level 2: dynamic batching


def dynamic_batching(model, requests, max_batch_size, max_wait) -> list[Completion]:
    _check_size("max_batch_size", max_batch_size)
    _check_size("max_wait", max_wait, 0)
    queue = _sequences(model, requests)
    step, served = 0, 0
    while served < len(queue):
        waiting = [s for s in queue[served:] if s.request.arrival <= step]
        full = len(waiting) >= max_batch_size
        if full or (waiting and step - waiting[0].request.arrival >= max_wait):
            batch = waiting[:max_batch_size]
            served += len(batch)
            step = _run_to_completion(model, batch, step)
        else:
            step += 1  # idle: wait for more requests or for the oldest to wait max_wait
    return _completions(queue)


# ----------------------------------------------------------------------------------------------
# Levels 3 and 4: continuous batching, chunked prefill, a block pool with preemption


class _BlockPool:
    """KV memory in blocks of `block_size` tokens: a sequence of n cached tokens holds
    ceil(n / block_size) of them. `num_blocks=None` means unlimited."""

    def __init__(self, num_blocks: int | None, block_size: int) -> None:
        self.num_blocks, self.block_size = num_blocks, block_size
        self.held: dict[int, int] = {}  # id(sequence) -> blocks

    def blocks(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_size)

    @property
    def free(self) -> float:
        used = sum(self.held.values())
        return math.inf if self.num_blocks is None else self.num_blocks - used

    def can_grow(self, seq: _Sequence, n: int) -> bool:
        return self.blocks(seq.cached + n) - self.held.get(id(seq), 0) <= self.free

    def grow(self, seq: _Sequence, n: int) -> None:
        self.held[id(seq)] = self.blocks(seq.cached + n)

    def release(self, seq: _Sequence) -> None:
        self.held.pop(id(seq), None)


def continuous_batching(
    model, requests, max_batch_size, max_tokens_per_step=None, kv_blocks=None, block_size=16
) -> list[Completion]:
    _check_size("max_batch_size", max_batch_size)
    if max_tokens_per_step is not None:
        _check_size("max_tokens_per_step", max_tokens_per_step)
    if kv_blocks is not None:
        _check_size("kv_blocks", kv_blocks)
    _check_size("block_size", block_size)
    queue = _sequences(model, requests)
    pool = _BlockPool(kv_blocks, block_size)
    for s in queue:
        need = pool.blocks(len(s.request.prompt) + s.request.max_new_tokens - 1)
        if kv_blocks is not None and need > kv_blocks:
            raise ValueError(
                f"kv_blocks: request {s.request.id} needs {need} blocks of {block_size} tokens "
                f"even alone, but kv_blocks is {kv_blocks}"
            )
    budget_per_step = math.inf if max_tokens_per_step is None else max_tokens_per_step
    arrivals, waiting, running = list(queue), [], []  # waiting by arrival; running by admission
    step = 0
    while arrivals or waiting or running:
        while arrivals and arrivals[0].request.arrival <= step:
            waiting.append(arrivals.pop(0))
        if not waiting and not running:
            step = arrivals[0].request.arrival  # idle until somebody arrives
            continue
        batch, budget = [], budget_per_step
        for seq in list(running):  # decodes and unfinished prefills first, oldest first
            if seq not in running or budget == 0:
                continue
            n = min(len(seq.pending), budget)
            while not pool.can_grow(seq, n):  # preempt the most recently admitted
                victim = running.pop()
                pool.release(victim)
                victim.cache = None  # its progress is recomputed from prompt + tokens so far
                bisect.insort(waiting, victim, key=lambda s: s.key)
                if victim is seq:
                    break
            if seq in running:
                pool.grow(seq, n)
                batch.append((seq, n))
                budget -= n
        while waiting and len(running) < max_batch_size and budget > 0:  # first come, first served
            seq = waiting[0]
            n = min(len(seq.pending), budget)
            if not pool.can_grow(seq, n):
                break
            running.append(waiting.pop(0))
            pool.grow(seq, n)
            batch.append((seq, n))
            budget -= n
        _run_step(model, batch, step)
        for seq in [s for s in running if s.done]:  # they leave at once
            running.remove(seq)
            pool.release(seq)
        step += 1
    return _completions(queue)
