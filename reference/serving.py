"""Reference solution for the serving kata. Read it after trying the kata yourself.

One engine with every technique of the other katas: continuous batching (batching), a paged KV
cache (kv_cache), attention over each sequence's blocks (kv_cache on the CPU, the FlashAttention
kernel on a GPU), grouped expert dispatch (moe) and, with a draft model, speculative decoding
with one batched verification call per step (speculative_decoding).

The arc of this file: level 1 runs the model's mixture the fast way; level 2's engine keeps a
pool of KV blocks, schedules the requests step by step and runs one packed model call per step;
level 3 lets a draft model propose tokens that the same call verifies; level 4 ends a request at
its first stop token, with or without a draft; level 5 caps the tokens of a step, so a long prompt
is fed in chunks (chunked prefill); level 6 shares the blocks of equal prefixes between requests
(prefix caching, the kv_cache kata's level 4 inside the engine).

Short names: P prompt length, N max_new_tokens, B rows in a call, T tokens a row feeds, L keys a
row attends over, bs block_size, k draft tokens per round.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

import torch

from grading.devices import gpu_path
from grading.model import causal_mask
from grading.model.naive import Completion, Request
from reference.moe import moe_forward

__all__ = ["Completion", "Request", "moe_feed_forward", "serve"]


def _check_int(name: str, value, least: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ValueError(f"{name}: expected an int >= {least}, got {value!r}")


# ----------------------------------------------------------------------------------------------
# Level 1: the model's mixture through grouped dispatch


def _expert_weights(moe) -> tuple[torch.Tensor, ...]:
    """The MoE kata's layout: gate_w [E, d]; w1, w3 [E, d, h]; w2 [E, h, d]."""
    w1 = torch.stack([e.w1.weight.T for e in moe.experts])  # nn.Linear keeps [out, in]
    w3 = torch.stack([e.w3.weight.T for e in moe.experts])
    w2 = torch.stack([e.w2.weight.T for e in moe.experts])
    return moe.gate.weight, w1, w3, w2


def moe_feed_forward(moe, x: torch.Tensor) -> torch.Tensor:
    """The mixture `moe` (a block's `mlp`) on x (N, dim), each expert run once on its tokens."""
    d = moe.gate.weight.shape[1]
    if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.shape[0] < 1 or x.shape[1] != d:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x: expected a tensor [N, dim] = [N >= 1, {d}], got {got}")
    if x.dtype != moe.gate.weight.dtype:
        raise ValueError(f"x: expected the mixture's dtype {moe.gate.weight.dtype}, got {x.dtype}")
    return moe_forward(x, *_expert_weights(moe), moe.top_k)


# ----------------------------------------------------------------------------------------------
# Level 2: the engine: a KV block pool, a scheduler, one packed call per step


@dataclass(eq=False)
class _Sequence:
    request: Request
    order: int  # its index in `requests`: ties in arrival are served in this order
    tokens: list[int]  # prompt + generated so far
    blocks: list[int] = field(default_factory=list)  # its block table
    cached: int = 0  # tokens whose keys and values the target holds
    draft_cached: int = 0  # ... the draft holds
    first_token: int | None = None
    finished: int | None = None
    stopped: bool = False  # its newest token is one of its stop tokens
    feed: int = 0  # level 5: pending tokens its row feeds this step (all of them, or a chunk)
    propose: int = 0  # draft tokens this step (none while a chunk of its prompt is fed)
    keys: list = field(default_factory=list)  # level 6: chained keys of its registered blocks

    @property
    def key(self) -> tuple[int, int]:
        return (self.request.arrival, self.order)

    @property
    def generated(self) -> int:
        return len(self.tokens) - len(self.request.prompt)

    @property
    def pending(self) -> int:
        """Tokens it has and the target has not read: its newest, or what is left of a prefill."""
        return len(self.tokens) - self.cached

    @property
    def done(self) -> bool:
        return self.stopped or self.generated == self.request.max_new_tokens

    def end_at_stop(self, since: int) -> None:
        """Level 4: cut the tokens committed from position `since` on at the first stop token
        among them, which is kept; the tokens past it were never the request's."""
        for i in range(since, len(self.tokens)):
            if self.tokens[i] in self.request.stop:
                del self.tokens[i + 1 :]
                self.stopped = True
                return


class _KVPool:
    """Keys and values of every layer in blocks of bs tokens: k, v (layers, blocks, Hkv, bs, hd).

    Block tables live on the sequences; one table serves the target's pool and the draft's.
    """

    def __init__(self, model, num_blocks: int, block_size: int) -> None:
        c, weight = model.config, next(model.parameters())
        shape = (c.n_layers, num_blocks, c.n_kv_heads, block_size, c.head_dim)
        self.k = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        self.v = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        self.block_size = block_size

    def attention(self, rows: list[tuple[_Sequence, int, int]]):
        """The `attention` callback of one packed call: row (seq, start, T) writes its T new
        keys at positions start .. start + T - 1 and attends over positions 0 .. start + T - 1."""
        bs, device = self.block_size, self.k.device
        positions = torch.cat([torch.arange(s, s + t) for _, s, t in rows])  # (N,)
        tables = [torch.tensor(seq.blocks, device=device) for seq, _, _ in rows]
        blocks = torch.cat(
            [tables[b][torch.arange(s, s + t) // bs] for b, (_, s, t) in enumerate(rows)]
        )
        offsets = (positions % bs).to(device)  # (N,)
        lengths = [t for _, _, t in rows]

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            self.k[layer, blocks, :, offsets] = k  # (N, Hkv, hd) scattered into their slots
            self.v[layer, blocks, :, offsets] = v
            outs = []
            for q_b, table, (_, start, T) in zip(q.split(lengths), tables, rows, strict=True):
                L = start + T
                k_b = self.k[layer, table].transpose(0, 1).flatten(1, 2)[:, :L]  # (Hkv, L, hd)
                v_b = self.v[layer, table].transpose(0, 1).flatten(1, 2)[:, :L]
                outs.append(_attend(q_b.transpose(0, 1), k_b, v_b).transpose(0, 1))  # (T, H, hd)
            return torch.cat(outs)  # (N, H, hd)

        return attend


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention of q (H, T, hd) over k, v (Hkv, L, hd), the last query seeing every key."""
    H, T, D = q.shape
    k = k.repeat_interleave(H // k.shape[0], dim=0)  # (H, L, hd)
    v = v.repeat_interleave(H // v.shape[0], dim=0)
    if gpu_path(q):  # on a GPU, and rehearsing: the FlashAttention kata's kernel (bottom-right)
        from reference.flash_attention import flash_attention

        return flash_attention(q[None], k[None], v[None], causal=True)[0]
    wide = torch.promote_types(q.dtype, torch.float32)  # float32, or float64 for float64
    scores = (q.to(wide) @ k.to(wide).transpose(1, 2)) / math.sqrt(D)  # (H, T, L)
    visible = causal_mask(T, k.shape[1], q.device)  # (T, L), bottom-right aligned
    scores = scores.masked_fill(~visible, float("-inf"))
    return (scores.softmax(dim=-1) @ v.to(wide)).to(q.dtype)  # (H, T, hd)


def _check(model, requests, max_batch_size, kv_blocks, block_size, draft, k) -> list[_Sequence]:
    _check_int("max_batch_size", max_batch_size, 1)
    if kv_blocks is not None:
        _check_int("kv_blocks", kv_blocks, 1)
    _check_int("block_size", block_size, 1)
    _check_int("k", k, 1)
    config, seen = model.config, set()
    if draft is not None and draft.config.vocab_size != config.vocab_size:
        raise ValueError(
            f"draft: vocab_size {draft.config.vocab_size} differs from the model's "
            f"{config.vocab_size}"
        )
    longest = min(m.config.max_seq_len for m in (model, draft) if m is not None)
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
        _check_int(f"{where}: max_new_tokens", r.max_new_tokens, 1)
        _check_int(f"{where}: arrival", r.arrival, 0)
        if not isinstance(r.stop, (tuple, list)) or not all(
            type(t) is int and 0 <= t < config.vocab_size for t in r.stop
        ):
            raise ValueError(
                f"{where}: stop: expected a tuple of token ids, Python ints in "
                f"0..{config.vocab_size - 1}, got {r.stop!r}"
            )
        total = len(r.prompt) + r.max_new_tokens - 1  # the last new token is never fed
        # (a stop token may never come: memory is checked for max_new_tokens)
        if total > longest:
            raise ValueError(
                f"{where}: prompt of {len(r.prompt)} tokens + max_new_tokens {r.max_new_tokens} "
                f"- 1 exceeds max_seq_len {longest}"
            )
        if kv_blocks is not None and math.ceil(total / block_size) > kv_blocks:
            raise ValueError(
                f"kv_blocks: request {r.id} needs {math.ceil(total / block_size)} blocks of "
                f"{block_size} tokens even alone, but kv_blocks is {kv_blocks}"
            )
    seqs = [_Sequence(r, i, list(r.prompt)) for i, r in enumerate(requests)]
    return sorted(seqs, key=lambda s: s.key)


class _Engine:
    def __init__(self, model, draft, num_blocks: int, block_size: int, k: int, sharing: bool):
        self.model, self.draft, self.k = model, draft, k
        self.block_size, self.sharing = block_size, sharing
        self.queue = OrderedDict.fromkeys(range(num_blocks))  # free blocks; the front goes first
        self.refs = [0] * num_blocks  # requests holding each block
        self.cached: dict = {}  # level 6: key -> the block registered under it
        self.key_of: dict = {}  # registered block -> its key
        self.pools = {model: _KVPool(model, num_blocks, block_size)}
        if draft is not None:
            self.pools[draft] = _KVPool(draft, num_blocks, block_size)
        self.experts = {  # per model and layer: the MoE kata's weight layout, stacked once
            m: [_expert_weights(b.mlp) for b in m.blocks] if m.config.n_experts else None
            for m in self.pools
        }

    # -- memory ---------------------------------------------------------------------------------

    def plan(self, seq: _Sequence, budget: float) -> int:
        """Level 5: what its row feeds within `budget` tokens: a chunk of its pending tokens, or
        all of them and (with a draft) the proposals that still fit, never one that could not be
        kept. Returns the tokens it feeds."""
        seq.feed = min(seq.pending, budget)
        seq.propose = 0
        if self.draft is not None and seq.feed == seq.pending:
            left = seq.request.max_new_tokens - seq.generated
            seq.propose = min(self.k, left - 1, budget - seq.feed)
        return seq.feed + seq.propose

    def needs(self, seq: _Sequence) -> int:
        """Blocks more its planned row needs: room for every token it feeds the target."""
        fed_to = seq.cached + seq.feed + seq.propose
        return math.ceil(fed_to / self.block_size) - len(seq.blocks)

    def grow(self, seq: _Sequence) -> None:
        for _ in range(self.needs(seq)):
            block, _ = self.queue.popitem(last=False)  # the least recently freed
            if block in self.key_of:  # its old contents are lost: unregister them
                del self.cached[self.key_of.pop(block)]
            self.refs[block] = 1
            seq.blocks.append(block)

    def shrink(self, seq: _Sequence, keep: int) -> None:
        """Keep the blocks of the first `keep` cached tokens; hand the rest back, last first."""
        kept = math.ceil(keep / self.block_size)
        for block in reversed(seq.blocks[kept:]):
            self.refs[block] -= 1
            if self.refs[block] == 0:
                self.queue[block] = None  # registered or not, it waits at the back
        del seq.blocks[kept:]
        del seq.keys[kept:]

    def release(self, seq: _Sequence) -> None:
        self.shrink(seq, 0)
        seq.cached = seq.draft_cached = 0  # a preempted sequence recomputes what it had

    # -- level 6: prefix caching ---------------------------------------------------------------

    def cached_run(self, seq: _Sequence) -> tuple[list[int], list]:
        """The registered blocks of its tokens' longest cached run of full blocks (never the
        block of its newest token, which is fed for its logits), and their keys."""
        bs, blocks, keys = self.block_size, [], []
        if not self.sharing:
            return blocks, keys
        for i in range((len(seq.tokens) - 1) // bs):
            key = (keys[-1] if keys else None, tuple(seq.tokens[i * bs : (i + 1) * bs]))
            if key not in self.cached:
                break
            keys.append(key)
            blocks.append(self.cached[key])
        return blocks, keys

    def join(self, seq: _Sequence, budget: float) -> int | None:
        """Admit `seq` with its cached run if its row fits within `budget` tokens and the free
        blocks; returns the tokens it feeds, or None (nothing changed) when it does not fit."""
        blocks, keys = self.cached_run(seq)
        seq.blocks += blocks  # a waiting request holds no block: its cached run comes first
        seq.cached += len(blocks) * self.block_size
        seq.draft_cached = seq.cached
        n = self.plan(seq, budget)
        reused = sum(block in self.queue for block in blocks)  # free ones it takes back
        if self.needs(seq) > len(self.queue) - reused:  # it waits: take nothing
            del seq.blocks[len(seq.blocks) - len(blocks) :]
            seq.cached -= len(blocks) * self.block_size
            seq.draft_cached = seq.cached
            return None
        for block in blocks:
            self.queue.pop(block, None)
            self.refs[block] += 1
        seq.keys = keys
        self.grow(seq)
        return n

    def register(self, seq: _Sequence) -> None:
        """Register its full blocks whose keys both models hold, so later requests share them."""
        if not self.sharing:
            return
        held = seq.cached if self.draft is None else min(seq.cached, seq.draft_cached)
        bs = self.block_size
        for i in range(len(seq.keys), held // bs):
            key = (seq.keys[-1] if seq.keys else None, tuple(seq.tokens[i * bs : (i + 1) * bs]))
            seq.keys.append(key)
            if key not in self.cached and seq.blocks[i] not in self.key_of:
                self.cached[key] = seq.blocks[i]
                self.key_of[seq.blocks[i]] = key

    # -- one packed call -----------------------------------------------------------------------

    def call(self, model, rows: list[tuple[_Sequence, list[int], int]]) -> list[torch.Tensor]:
        """Feed row (seq, tokens, start) of every row in one call; returns logits [T, vocab]."""
        device = next(model.parameters()).device
        pool, experts = self.pools[model], self.experts[model]
        attention = pool.attention([(seq, start, len(t)) for seq, t, start in rows])
        feed_forward = None
        if experts is not None:

            def feed_forward(layer: int, x: torch.Tensor) -> torch.Tensor:
                return moe_forward(x, *experts[layer], model.config.top_k)

        ids = [torch.tensor(t, device=device) for _, t, _ in rows]
        return model.forward_packed(ids, [start for _, _, start in rows], attention, feed_forward)

    # -- one step ------------------------------------------------------------------------------

    def step(self, batch: list[_Sequence], now: int) -> None:
        proposed = {seq: [] for seq in batch}
        for i in range(max(seq.propose for seq in batch)):  # one batched draft call per position
            rows = [s for s in batch if s.propose > i]
            feeds = [(s, (s.tokens + proposed[s])[s.draft_cached :], s.draft_cached) for s in rows]
            logits = self.call(self.draft, feeds)
            for (seq, fed, _), out in zip(feeds, logits, strict=True):
                seq.draft_cached += len(fed)
                proposed[seq].append(int(out[-1].argmax()))
        feeds = [(s, s.tokens[s.cached : s.cached + s.feed] + proposed[s], s.cached) for s in batch]
        logits = self.call(self.model, feeds)  # the target verifies every row's proposals at once
        for seq, out in zip(batch, logits, strict=True):
            if seq.feed < seq.pending:  # level 5: a chunk of a prefill, no token yet
                seq.cached += seq.feed
                self.register(seq)
                continue
            m = len(proposed[seq])
            best = out[-(m + 1) :].argmax(dim=-1).tolist()  # the target's choice after each prefix
            j = 0
            while j < m and proposed[seq][j] == best[j]:
                j += 1
            committed = len(seq.tokens)
            seq.tokens += proposed[seq][:j] + [best[j]]
            seq.end_at_stop(committed)  # level 4: nothing past the first stop token
            # Roll back what was read past the committed tokens; the newest is read next round.
            seq.cached = len(seq.tokens) - 1
            seq.draft_cached = min(seq.draft_cached, len(seq.tokens) - 1)
            self.shrink(seq, seq.cached)
            self.register(seq)
            if seq.first_token is None:
                seq.first_token = now
            if seq.done:
                seq.finished = now


@torch.no_grad()
def serve(
    model, requests, *, max_batch_size=32, kv_blocks=None, block_size=16, draft=None, k=4,
    max_tokens_per_step=None, prefix_caching=False,
) -> list[Completion]:  # fmt: skip
    """Greedy answers to `requests`, each equal to decoding it alone, on the batching clock."""
    queue = _check(model, requests, max_batch_size, kv_blocks, block_size, draft, k)
    if max_tokens_per_step is not None:
        _check_int("max_tokens_per_step", max_tokens_per_step, 1)
    if type(prefix_caching) is not bool:
        raise ValueError(f"prefix_caching: expected True or False, got {prefix_caching!r}")
    if kv_blocks is None:  # room for everybody at once
        total = [len(s.tokens) + s.request.max_new_tokens - 1 for s in queue]
        kv_blocks = max(1, sum(math.ceil(t / block_size) for t in total))
    engine = _Engine(model, draft, kv_blocks, block_size, k, prefix_caching)
    per_step = math.inf if max_tokens_per_step is None else max_tokens_per_step
    arrivals, waiting, running = list(queue), [], []  # waiting by arrival; running by admission
    now = 0
    while arrivals or waiting or running:
        while arrivals and arrivals[0].request.arrival <= now:
            waiting.append(arrivals.pop(0))
        if not waiting and not running:
            now = arrivals[0].request.arrival  # idle until somebody arrives
            continue
        batch, budget = [], per_step
        for seq in list(running):  # the running first, oldest admitted first
            if seq not in running or budget == 0:
                continue
            engine.plan(seq, budget)
            while engine.needs(seq) > len(engine.queue):  # preempt the latest admitted
                victim = running.pop()
                engine.release(victim)
                waiting = sorted(waiting + [victim], key=lambda s: s.key)
                if victim is seq:
                    break
            if seq in running:
                engine.grow(seq)
                batch.append(seq)
                budget -= seq.feed + seq.propose
        while waiting and len(running) < max_batch_size and budget > 0:
            n = engine.join(waiting[0], budget)  # first come, first served
            if n is None:
                break
            running.append(waiting.pop(0))
            batch.append(running[-1])
            budget -= n
        engine.step(batch, now)
        for seq in [s for s in running if s.done]:  # they leave at once
            running.remove(seq)
            engine.release(seq)
        now += 1
    return [
        Completion(
            s.request.id,
            s.tokens[len(s.request.prompt) :],
            s.request.arrival,
            s.first_token,
            s.finished,
        )
        for s in sorted(queue, key=lambda s: s.order)
    ]
