"""The tiny Llama-style decoder the katas share (RMSNorm, RoPE, grouped-query attention, SwiGLU).

Its contract is public; the KV-cache, batching and speculative-decoding katas rely on it:

    model.config: n_layers, n_heads, n_kv_heads, head_dim, vocab_size, max_seq_len
    model(ids, cache=None) -> logits           ids LongTensor [B, T], logits [B, T, vocab_size]

With a cache, the new tokens take positions cache.seq_len ... cache.seq_len + T - 1 (read once,
before the first layer updates the cache). Each attention layer calls

    k_all, v_all = cache.update(layer_index, k, v)  # k, v: [B, n_kv_heads, T, head_dim], RoPE'd

and attends causally over what comes back, the newest query aligned with the newest key.

Ragged batches (for batching): one call can carry rows at different positions that add different
numbers of new tokens, each row with its own cache (a prefill of 17 tokens beside decodes of 1):

    model.forward_batch(rows, caches) -> logits   rows: B LongTensors [T_b]; caches: B caches
                                                  logits: B tensors [T_b, vocab_size]

The layout is packed (varlen): the rows are concatenated into one sequence of sum(T_b) tokens for
every matrix product, so no padding is ever computed there. Each row appends its keys and values
to its own cache; attention then gives each row what `model(row[None], cache)` would. On a GPU
(and in a rehearsal, `grading.devices.gpu_path`) it is one call of PyTorch's
`scaled_dot_product_attention` for all rows, padded to the longest and masked, so a step launches
as many kernels for 16 rows as for one; on the CPU it runs row by row, so that the FLOPs counted
are exactly those each row needs (the batching kata's cost targets count them). A row's logits
never depend on what else is in the batch. `SequenceCache` is a ready cache for one row. Every
call is recorded in `model.batch_log` (see `BatchCall`): which cache each row used, where it
started, the tokens it fed; the batching tests read it to check a schedule.

A serving engine that keeps its own (paged) memory runs the same packed pass and supplies the
attention, and optionally the feed-forward, itself (see `forward_packed`):

    model.forward_packed(rows, starts, attention, feed_forward=None) -> logits

Real checkpoints: `from_pretrained(folder, dtype, device)` loads a Hugging Face Llama (or a
Mixtral into the mixture variant) from a local folder; see grading/model/hf.py.

A mixture-of-experts variant (for serving): `make_model(seed, dtype, n_experts=8, top_k=2)` puts
a `MoE` of SwiGLU experts in every block's `mlp`; the contract is otherwise the same.

The weights come from a seed. They are scaled so that attention is sharp and the output depends
on the whole context: a cache that drops or misplaces keys changes the tokens generated.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from grading.devices import gpu_path
from grading.model.layers import Block, ModelConfig, grouped_attention, rms_norm, rope_tables


def _row_by_row(q, lengths, keys, values):
    """Causal attention of each row on its own: q (N, H, hd), row b's lengths[b] queries back to
    back; keys[b], values[b] (Hkv, L_b, hd). Returns (N, H, hd). Exactly the FLOPs each row
    needs, in one small attention (some 10 operators) per row, the same arithmetic as
    `causal_attention` on that row alone."""
    H, hd = q.shape[1:]
    outs = []
    for q_b, k_b, v_b in zip(q.split(lengths), keys, values, strict=True):
        T, Hkv = q_b.shape[0], k_b.shape[0]
        q_b = q_b.transpose(0, 1).reshape(Hkv, H // Hkv * T, hd)  # (T, H, hd) -> (Hkv, G·T, hd)
        out, _ = grouped_attention(q_b, k_b, v_b, T)
        outs.append(out.view(H, T, hd).transpose(0, 1))  # (Hkv, G·T, hd) -> (T, H, hd)
    return torch.cat(outs)  # (N, H, hd)


class _Padded:
    """A ragged batch laid out for one attention call over all its rows.

    Row b has T_b = lengths[b] queries (packed back to back: N in all) and attends over
    L_b = key_lengths[b] keys, its newest query aligned with its newest key. Padded to the
    longest row, the queries are (B, Tmax) and the keys (B, Lmax); a padding slot holds a copy
    of some real token (an index clamped into range), masked off for every real query (a padded
    key) or dropped from the output (a padded query). Made once per call, used by every layer.
    """

    def __init__(
        self, lengths: list[int], key_lengths: list[int], heads: int, kv_heads: int, device
    ):
        self.key_lengths = key_lengths
        # (H,): the key-value head each query head reads (grouped-query attention)
        self.kv_head = torch.arange(heads, device=device) // (heads // kv_heads)
        T, L = torch.tensor([lengths, key_lengths], device=device)  # (B,) each
        t = torch.arange(max(lengths), device=device)  # (Tmax,)
        j = torch.arange(max(key_lengths), device=device)  # (Lmax,)
        # (B, Tmax) and (B, Lmax): where each padded slot reads from, in the packed tokens and in
        # the keys of all rows back to back.
        self.queries = ((T.cumsum(0) - T)[:, None] + t).clamp(max=sum(lengths) - 1)
        self.keys = ((L.cumsum(0) - L)[:, None] + j).clamp(max=sum(key_lengths) - 1)
        # Query t of row b sits at key position L_b - T_b + t and sees the keys up to it.
        self.mask = (j <= (L - T)[:, None, None] + t[:, None])[:, None]  # (B, 1, Tmax, Lmax)
        slots = [(b, i) for b, n in enumerate(lengths) for i in range(n)]
        self.real = tuple(torch.tensor(slots, device=device).T)  # (N,) twice: (row, query slot)

    def attend(self, q, keys, values):
        """q (N, H, hd); keys[b], values[b] (Hkv, L_b, hd). Returns (N, H, hd)."""
        q = q[self.queries].transpose(1, 2)  # (B, H, Tmax, hd)
        k, v = (  # all rows' keys back to back (Hkv, sum L_b, hd), then padded: (B, H, Lmax, hd)
            torch.cat(t, dim=1)[self.kv_head[:, None, None], self.keys].transpose(0, 1)
            for t in (keys, values)
        )
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)  # (B, H, Tmax, hd)
        return out.transpose(1, 2)[self.real]  # (N, H, hd)


@dataclass(frozen=True)
class ModelCall:
    """One forward call, as the model itself logs it (the judge reads `model.calls`)."""

    tokens: int  # ids.shape[1]: how many positions this call fed
    batch: int
    cache_len: int | None  # cache.seq_len before the call; None without a cache (or ragged)
    grad_enabled: bool  # grad mode was on: the call built an autograd graph of the weights


@dataclass(frozen=True)
class BatchRow:
    cache: int | None  # id() of the row's cache object; None in `forward_packed`
    start: int  # cache.seq_len before the call: the position of the row's first new token
    tokens: tuple[int, ...]  # the token ids the row fed


@dataclass(frozen=True)
class BatchCall:
    rows: tuple[BatchRow, ...]

    @property
    def new_tokens(self) -> int:
        return sum(len(row.tokens) for row in self.rows)


class SequenceCache:
    """The keys and values of one sequence, every layer, preallocated for `capacity` tokens
    (by default the model's max_seq_len) on the first update; follows the cache contract."""

    def __init__(self, config: ModelConfig, capacity: int | None = None) -> None:
        self.n_layers = config.n_layers
        self.capacity = config.max_seq_len if capacity is None else capacity
        self.k = self.v = None  # (n_layers, 1, Hkv, capacity, hd) each, once known
        self.lengths = [0] * config.n_layers

    @property
    def seq_len(self) -> int:
        return self.lengths[0]

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        B, Hkv, T, hd = k.shape  # (1, Hkv, T, hd)
        if self.k is None:
            shape = (self.n_layers, B, Hkv, self.capacity, hd)
            self.k = torch.empty(shape, dtype=k.dtype, device=k.device)
            self.v = torch.empty(shape, dtype=v.dtype, device=v.device)
        start = self.lengths[layer]
        if start + T > self.capacity:
            raise ValueError(f"SequenceCache: {start + T} tokens exceed capacity {self.capacity}")
        self.k[layer, :, :, start : start + T] = k
        self.v[layer, :, :, start : start + T] = v
        self.lengths[layer] = start + T
        return self.k[layer, :, :, : start + T], self.v[layer, :, :, : start + T]


class TinyLlama(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.calls: list[ModelCall] = []  # every forward call, appended by the model itself
        self.embed = nn.Embedding(config.vocab_size, config.dim)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
        self.norm = nn.Parameter(torch.ones(config.dim))
        self.lm_head = nn.Linear(config.dim, config.vocab_size, bias=False)
        cos, sin = rope_tables(config.head_dim, config.max_seq_len, config.rope_base, torch.float64)
        self.register_buffer("rope_cos", cos, persistent=False)  # (max_seq_len, hd)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.batch_log: list[BatchCall] = []  # every forward_batch call, in order

    def _run(self, ids: torch.Tensor, cache=None):
        if ids.dim() != 2 or ids.dtype != torch.long:
            raise ValueError(
                f"ids: expected a LongTensor [B, T], got {ids.dtype} {tuple(ids.shape)}"
            )
        B, T = ids.shape
        start = 0 if cache is None else int(cache.seq_len)  # read once, before any layer updates
        if T < 1:
            raise ValueError(
                f"ids: an empty input {tuple(ids.shape)}, with {start} tokens in the cache: "
                "nothing to run. Usually a slice of the tokens the cache has not read, such as "
                "ids[:, cache.seq_len : n], came out empty because the cache holds more tokens "
                "than it should: was it cropped back after a rejection or a rollback?"
            )
        if start + T > self.config.max_seq_len:
            raise ValueError(
                f"ids: positions {start}..{start + T - 1} must lie in "
                f"0..{self.config.max_seq_len - 1}"
            )
        dtype = self.embed.weight.dtype
        cos = self.rope_cos[start : start + T].to(dtype)  # (T, hd)
        sin = self.rope_sin[start : start + T].to(dtype)
        x = self.embed(ids)  # (B, T, dim)
        maps = []
        for block in self.blocks:
            x, probs = block(x, cos, sin, cache)
            maps.append(probs)
        return self.lm_head(rms_norm(x, self.norm, self.config.norm_eps)), maps  # (B, T, vocab)

    def forward(self, ids: torch.Tensor, cache=None) -> torch.Tensor:
        if isinstance(ids, torch.Tensor) and ids.dim() == 2:  # _run refuses anything else
            cache_len = None if cache is None else int(cache.seq_len)
            B, T = ids.shape
            self.calls.append(ModelCall(T, B, cache_len, torch.is_grad_enabled()))
        return self._run(ids, cache)[0]

    @property
    def tokens_fed(self) -> list[int]:
        """Positions fed per logged call: `[T, 1, 1, ...]` for a cached generate."""
        return [c.tokens for c in self.calls]

    def forward_batch(self, rows: list[torch.Tensor], caches: list) -> list[torch.Tensor]:
        """A ragged batch: row b feeds rows[b] (LongTensor [T_b], T_b >= 1) at positions
        caches[b].seq_len ... caches[b].seq_len + T_b - 1, through its own cache caches[b]
        (each cache follows the contract above with batch size 1). Returns B logits [T_b, vocab].
        """
        if not isinstance(rows, (list, tuple)) or not isinstance(caches, (list, tuple)):
            raise ValueError("rows and caches: expected two lists, one entry per row")
        if not rows or len(rows) != len(caches):
            raise ValueError(
                f"rows and caches: expected one cache per row and at least one row, got "
                f"{len(rows)} rows and {len(caches)} caches"
            )
        if len({id(cache) for cache in caches}) != len(caches):
            raise ValueError("caches: each row needs a cache of its own")
        starts = [int(cache.seq_len) for cache in caches]  # read once, before any layer updates
        lengths = [row.numel() if isinstance(row, torch.Tensor) else 0 for row in rows]
        padded = None  # the rows' padded layout, made once the caches' key counts are known

        def attention(layer, q, k, v):  # q (N, H, hd); k, v (N, Hkv, hd)
            nonlocal padded
            keys, values = [], []
            for k_b, v_b, cache in zip(k.split(lengths), v.split(lengths), caches, strict=True):
                # (T_b, Hkv, hd) -> (1, Hkv, T_b, hd), the cache contract's layout
                k_all, v_all = cache.update(
                    layer, k_b.transpose(0, 1)[None], v_b.transpose(0, 1)[None]
                )
                keys.append(k_all[0])  # (Hkv, L_b, hd): every key the row attends over
                values.append(v_all[0])
            if not gpu_path(q):
                return _row_by_row(q, lengths, keys, values)
            key_lengths = [t.shape[1] for t in keys]
            if padded is None or padded.key_lengths != key_lengths:
                padded = _Padded(lengths, key_lengths, q.shape[1], k.shape[1], q.device)
            return padded.attend(q, keys, values)

        return self._packed(rows, starts, attention, None, [id(c) for c in caches])

    def forward_packed(
        self, rows: list[torch.Tensor], starts: list[int], attention, feed_forward=None
    ) -> list[torch.Tensor]:
        """A ragged batch whose memory the caller keeps (a serving engine's paged KV cache).

        Row b feeds rows[b] (LongTensor [T_b], T_b >= 1) at positions starts[b] ... starts[b] +
        T_b - 1. The rows are packed into N = sum(T_b) tokens. In every layer the model calls
        `attention(layer, q, k, v)` with q (N, n_heads, head_dim) and k, v (N, n_kv_heads,
        head_dim), RoPE applied, row by row in order; it returns (N, n_heads, head_dim): each
        token's causal attention over its own sequence, the caller storing k and v as it likes.
        `feed_forward(layer, x)`, given, replaces each block's feed-forward on x (N, dim): for a
        mixture, the caller's own dispatch. Returns B logits [T_b, vocab]; logged like
        forward_batch, with `cache=None` in each row of `batch_log`.
        """
        if not isinstance(rows, (list, tuple)) or not isinstance(starts, (list, tuple)):
            raise ValueError("rows and starts: expected two lists, one entry per row")
        if not rows or len(rows) != len(starts):
            raise ValueError(
                f"rows and starts: expected one start per row and at least one row, got "
                f"{len(rows)} rows and {len(starts)} starts"
            )
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in starts):
            raise ValueError(f"starts: expected ints >= 0, got {list(starts)!r:.80}")
        return self._packed(rows, list(starts), attention, feed_forward, [None] * len(rows))

    def _packed(self, rows, starts, attention, feed_forward, cache_ids) -> list[torch.Tensor]:
        for b, (row, start) in enumerate(zip(rows, starts, strict=True)):
            if not isinstance(row, torch.Tensor) or row.dim() != 1 or row.dtype != torch.long:
                raise ValueError(f"rows[{b}]: expected a LongTensor [T], got {row!r:.60}")
            if row.numel() < 1 or start + row.numel() > self.config.max_seq_len:
                why = (
                    "an empty row, nothing to run: usually a slice of the tokens not read yet, "
                    "such as tokens[cached:], came out empty because the cache counts more "
                    "tokens than the sequence holds"
                    if row.numel() < 1
                    else "past the end of the model's context: either the sequence is longer "
                    "than the context, or the row starts later than it should"
                )
                raise ValueError(
                    f"rows[{b}]: positions {start}..{start + row.numel() - 1} must lie in "
                    f"0..{self.config.max_seq_len - 1}: {why}. Was the cache (or the row's "
                    "start) cropped back after a rejection or a rollback?"
                )
        lengths = [row.numel() for row in rows]
        ids = torch.cat(list(rows))  # (N,) every row's tokens back to back
        positions = torch.tensor(  # (N,) each token's position in its own sequence
            [p for s, t in zip(starts, lengths, strict=True) for p in range(s, s + t)],
            device=self.rope_cos.device,
        )
        dtype = self.embed.weight.dtype
        cos, sin = self.rope_cos[positions].to(dtype), self.rope_sin[positions].to(dtype)  # (N, hd)
        x = self.embed(ids)  # (N, dim)
        for block in self.blocks:
            x = block.forward_packed(x, cos, sin, attention, feed_forward)
        logits = self.lm_head(rms_norm(x, self.norm, self.config.norm_eps))  # (N, vocab)
        self.calls.append(ModelCall(sum(lengths), len(rows), None, torch.is_grad_enabled()))
        fed = zip(cache_ids, starts, rows, strict=True)
        self.batch_log.append(
            BatchCall(tuple(BatchRow(c, s, tuple(r.tolist())) for c, s, r in fed))
        )
        return list(logits.split(lengths))

    @torch.no_grad()
    def attention_maps(self, ids: torch.Tensor) -> list[torch.Tensor]:
        """Attention probabilities of every layer for `ids` without a cache: (B, H, T, T) each."""
        return self._run(ids)[1]


def make_model(seed: int = 0, dtype: torch.dtype = torch.float32, **overrides) -> TinyLlama:
    """A TinyLlama with weights drawn from `seed` (the same weights in every dtype)."""
    config = ModelConfig(**overrides)
    if config.n_heads % config.n_kv_heads:
        raise ValueError(f"n_heads ({config.n_heads}) must be a multiple of n_kv_heads")
    if config.head_dim % 2:
        raise ValueError(f"head_dim must be even for RoPE, got {config.head_dim}")
    if config.n_experts and not 1 <= config.top_k <= config.n_experts:
        raise ValueError(f"top_k must lie in 1..n_experts = 1..{config.n_experts}")
    model = TinyLlama(config)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() < 2:  # norm weights stay at 1
                continue
            std = 1.0 if name == "embed.weight" else 1.0 / math.sqrt(p.shape[1])
            if name.endswith(("wq.weight", "wk.weight")):
                std *= config.qk_gain
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * std)
    return model.to(dtype).eval()


@torch.no_grad()
def load_weights_in_place(model: TinyLlama, seed: int) -> None:
    """Overwrite every weight of `model` in place with those `make_model(seed)` draws for its
    config, as loading a checkpoint into a live model does: the same tensors, new values. A
    test calls an implementation, then this, then the implementation again: nothing derived
    from a model's weights may be kept from one call to the next."""
    fresh = make_model(seed, model.embed.weight.dtype, **asdict(model.config))
    for mine, new in zip(model.parameters(), fresh.parameters(), strict=True):
        mine.copy_(new)


@torch.no_grad()
def greedy_generate_no_cache(model, prompt_ids: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """The plain generator the tests compare against: re-feeds the whole sequence every step."""
    ids = prompt_ids
    for _ in range(max_new_tokens):
        next_id = model(ids)[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
        ids = torch.cat([ids, next_id], dim=1)
    return ids
