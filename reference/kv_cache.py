"""Reference solution for the KV-cache kata. Read it after you have tried the kata yourself."""

from __future__ import annotations

import math
from collections import OrderedDict

import torch


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")


def _check_dtype(dtype) -> None:
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype: expected a torch.dtype, got {dtype!r}")


# ----------------------------------------------------------------------------------------------
# Level 1: the memory arithmetic


def kv_cache_bytes(n_layers, n_kv_heads, head_dim, seq_len, batch_size, dtype) -> int:
    """Bytes needed to cache keys and values for `batch_size` sequences of `seq_len` tokens."""
    _check_positive(
        n_layers=n_layers, n_kv_heads=n_kv_heads, head_dim=head_dim, batch_size=batch_size
    )
    if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len < 0:
        raise ValueError(f"seq_len: expected an int >= 0, got {seq_len!r}")
    _check_dtype(dtype)
    per_token = 2 * n_layers * n_kv_heads * head_dim * dtype.itemsize  # 2: one key and one value
    return per_token * seq_len * batch_size


# ----------------------------------------------------------------------------------------------
# Level 1: a contiguous, preallocated cache


class KVCache:
    """Keys and values of every layer, preallocated for `max_seq_len` tokens.

    Storage per layer: k, v of shape (B, Hkv, max_seq_len, D). `update` writes the new tokens
    in place and returns views of everything written so far: nothing is copied per step.
    """

    def __init__(
        self,
        n_layers,
        batch_size,
        n_kv_heads,
        head_dim,
        max_seq_len,
        dtype=torch.float32,
        device="cpu",
    ):
        _check_positive(
            n_layers=n_layers,
            batch_size=batch_size,
            n_kv_heads=n_kv_heads,
            head_dim=head_dim,
            max_seq_len=max_seq_len,
        )
        _check_dtype(dtype)
        self.max_seq_len = max_seq_len
        shape = (n_layers, batch_size, n_kv_heads, max_seq_len, head_dim)  # (layers, B, Hkv, S, D)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.lengths = [0] * n_layers  # tokens written, per layer

    @property
    def seq_len(self) -> int:
        return self.lengths[0]

    def update(self, layer, k, v):
        n_layers, B, Hkv, S, D = self.k.shape
        if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer < n_layers:
            raise ValueError(f"layer: expected an int in 0..{n_layers - 1}, got {layer!r}")
        for name, x in (("k", k), ("v", v)):
            if (
                not isinstance(x, torch.Tensor)
                or x.dim() != 4
                or x.shape[0] != B
                or x.shape[1] != Hkv
                or x.shape[2] < 1
                or x.shape[3] != D
            ):
                shape = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
                raise ValueError(
                    f"{name}: expected shape [{B}, {Hkv}, T, {D}] (batch, kv heads, T >= 1 new "
                    f"tokens, head_dim), got {shape}"
                )
            if x.dtype != self.k.dtype:
                raise ValueError(f"{name}: expected dtype {self.k.dtype}, got {x.dtype}")
        if k.shape != v.shape:
            raise ValueError(f"k and v: shapes differ, {list(k.shape)} vs {list(v.shape)}")
        start, T = self.lengths[layer], k.shape[2]
        if start + T > S:
            raise ValueError(f"k: {T} new tokens after {start} cached would pass max_seq_len={S}")
        self.k[layer, :, :, start : start + T] = k
        self.v[layer, :, :, start : start + T] = v
        self.lengths[layer] = start + T
        return self.k[layer, :, :, : start + T], self.v[layer, :, :, : start + T]  # views

    def crop(self, length) -> None:
        if (
            not isinstance(length, int)
            or isinstance(length, bool)
            or not 0 <= length <= self.seq_len
        ):
            raise ValueError(f"length: expected an int in 0..{self.seq_len}, got {length!r}")
        self.lengths = [min(n, length) for n in self.lengths]


# ----------------------------------------------------------------------------------------------
# Level 2: greedy generation with the cache


def _check_generate_args(model, prompt_ids, max_new_tokens) -> None:
    c = model.config
    if (
        not isinstance(prompt_ids, torch.Tensor)
        or prompt_ids.dim() != 2
        or prompt_ids.dtype != torch.long
        or prompt_ids.shape[0] < 1
        or prompt_ids.shape[1] < 1
    ):
        got = (
            f"{prompt_ids.dtype} of shape {list(prompt_ids.shape)}"
            if isinstance(prompt_ids, torch.Tensor)
            else type(prompt_ids).__name__
        )
        raise ValueError(f"prompt_ids: expected a LongTensor [B, T], B, T >= 1, got {got}")
    low, high = int(prompt_ids.min()), int(prompt_ids.max())
    if low < 0 or high >= c.vocab_size:
        raise ValueError(
            f"prompt_ids: token ids must lie in 0..{c.vocab_size - 1}, got {low}..{high}"
        )
    if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool):
        raise ValueError(f"max_new_tokens: expected an int >= 0, got {max_new_tokens!r}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens: expected an int >= 0, got {max_new_tokens!r}")
    T = prompt_ids.shape[1]
    if T + max_new_tokens > c.max_seq_len:
        raise ValueError(
            f"prompt_ids: {T} tokens + max_new_tokens={max_new_tokens} pass the model's "
            f"max_seq_len={c.max_seq_len}"
        )


@torch.no_grad()
def generate(model, prompt_ids, max_new_tokens):
    """Greedy decoding: one call on the whole prompt, then one call per new token."""
    _check_generate_args(model, prompt_ids, max_new_tokens)
    if max_new_tokens == 0:
        return prompt_ids.clone()
    c = model.config
    B, T = prompt_ids.shape
    weight = next(model.parameters())
    cache = KVCache(
        c.n_layers, B, c.n_kv_heads, c.head_dim, T + max_new_tokens, weight.dtype, weight.device
    )
    out = torch.empty(B, T + max_new_tokens, dtype=torch.long, device=prompt_ids.device)
    out[:, :T] = prompt_ids
    logits = model(prompt_ids, cache)  # (B, T, vocab): the prefill
    for i in range(T, T + max_new_tokens):
        out[:, i] = logits[:, -1].argmax(dim=-1)
        if i + 1 < T + max_new_tokens:
            logits = model(out[:, i : i + 1], cache)  # (B, 1, vocab): one token at a time
    return out


# ----------------------------------------------------------------------------------------------
# Level 3: a paged cache


class OutOfBlocks(RuntimeError):
    """The block pool has no free block left."""


class PagedKVCache:
    """One layer's keys and values in fixed-size blocks drawn from a shared pool.

    Physical storage: k_pool, v_pool of shape (num_blocks, Hkv, block_size, D). Each sequence
    owns a block table (a list of physical block numbers); its token t lives in block
    table[t // block_size] at offset t % block_size. Blocks are taken when a sequence needs one
    and returned on `free`.
    """

    def __init__(
        self, num_blocks, block_size, n_kv_heads, head_dim, dtype=torch.float32, device="cpu"
    ):
        _check_positive(
            num_blocks=num_blocks, block_size=block_size, n_kv_heads=n_kv_heads, head_dim=head_dim
        )
        _check_dtype(dtype)
        self.block_size = block_size
        shape = (num_blocks, n_kv_heads, block_size, head_dim)  # (blocks, Hkv, block_size, D)
        self.k_pool = torch.zeros(shape, dtype=dtype, device=device)
        self.v_pool = torch.zeros(shape, dtype=dtype, device=device)
        self.free_list = list(range(num_blocks - 1, -1, -1))  # pop() hands out block 0 first
        self.tables: dict = {}
        self.lengths: dict = {}

    @property
    def num_blocks(self) -> int:
        return self.k_pool.shape[0]

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_list)

    def block_table(self, seq_id) -> list:
        return list(self.tables.get(seq_id, []))

    def length(self, seq_id) -> int:
        return self.lengths.get(seq_id, 0)

    def append(self, seq_id, k, v) -> None:
        """Append k, v of shape [Hkv, T, D] to sequence `seq_id` (created on first append)."""
        _, Hkv, bs, D = self.k_pool.shape
        for name, x in (("k", k), ("v", v)):
            if (
                not isinstance(x, torch.Tensor)
                or x.dim() != 3
                or x.shape[0] != Hkv
                or x.shape[1] < 1
                or x.shape[2] != D
                or x.shape != k.shape
            ):
                shape = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
                raise ValueError(
                    f"{name}: expected shape [{Hkv}, T, {D}] (kv heads, T >= 1 new tokens, "
                    f"head_dim), the same for k and v, got {shape}"
                )
            if x.dtype != self.k_pool.dtype:
                raise ValueError(f"{name}: expected dtype {self.k_pool.dtype}, got {x.dtype}")
        start, T = self.length(seq_id), k.shape[1]
        table = self.tables.get(seq_id, [])
        needed = math.ceil((start + T) / bs) - len(table)
        if needed > len(self.free_list):  # refuse before taking anything: nothing changes
            raise OutOfBlocks(
                f"sequence {seq_id!r} needs {needed} more block(s) of {bs} tokens but the pool "
                f"has {len(self.free_list)} free of {self.num_blocks}; free a sequence first"
            )
        table = table + [self.free_list.pop() for _ in range(needed)]
        positions = torch.arange(start, start + T, device=self.k_pool.device)
        blocks = torch.tensor(table, device=self.k_pool.device)[positions // bs]  # (T,)
        offsets = positions % bs  # (T,)
        self.k_pool[blocks, :, offsets] = k.transpose(0, 1)  # (T, Hkv, D) scattered into the pool
        self.v_pool[blocks, :, offsets] = v.transpose(0, 1)
        self.tables[seq_id] = table
        self.lengths[seq_id] = start + T

    def gather(self, seq_id):
        """Everything cached for `seq_id`, in order: k, v of shape [Hkv, length, D]."""
        if seq_id not in self.tables:
            raise ValueError(f"seq_id: unknown sequence {seq_id!r} (never appended, or freed)")
        table = torch.tensor(self.tables[seq_id], device=self.k_pool.device)
        n = self.lengths[seq_id]
        # (blocks, Hkv, bs, D) -> (Hkv, blocks * bs, D) -> (Hkv, n, D)
        k = self.k_pool[table].transpose(0, 1).flatten(1, 2)[:, :n]
        v = self.v_pool[table].transpose(0, 1).flatten(1, 2)[:, :n]
        return k, v

    def free(self, seq_id) -> None:
        """Return every block of `seq_id` to the pool."""
        if seq_id not in self.tables:
            raise ValueError(f"seq_id: unknown sequence {seq_id!r} (never appended, or freed)")
        self.free_list.extend(reversed(self.tables.pop(seq_id)))
        del self.lengths[seq_id]


def paged_attention(q, cache, seq_id):
    """Causal attention of q [H, Tq, D] over the keys cached for `seq_id` (bottom-right aligned).

    The cache holds the queries' own keys already: the last query sees every cached key.
    Computed in float32 (float64 for float64 input); returns [H, Tq, D] in q's dtype.
    """
    k, v = cache.gather(seq_id)  # (Hkv, N, D)
    Hkv, N, D = k.shape
    if (
        not isinstance(q, torch.Tensor)
        or q.dim() != 3
        or q.shape[0] % Hkv
        or q.shape[2] != D
        or not 1 <= q.shape[1] <= N
    ):
        shape = list(q.shape) if isinstance(q, torch.Tensor) else type(q).__name__
        raise ValueError(
            f"q: expected shape [H, Tq, {D}] with H a multiple of {Hkv} and 1 <= Tq <= {N}, "
            f"got {shape}"
        )
    if q.dtype != k.dtype:
        raise ValueError(f"q: expected the cache's dtype {k.dtype}, got {q.dtype}")
    H, Tq, _ = q.shape
    wide = torch.promote_types(q.dtype, torch.float32)  # float32, or float64 for float64 input
    k = k.repeat_interleave(H // Hkv, dim=0).to(wide)  # (H, N, D)
    v = v.repeat_interleave(H // Hkv, dim=0).to(wide)
    scores = (q.to(wide) @ k.transpose(1, 2)) / math.sqrt(D)  # (H, Tq, N)
    visible = torch.arange(N)[None, :] <= torch.arange(Tq)[:, None] + (N - Tq)  # bottom-right
    scores = scores.masked_fill(~visible.to(q.device), float("-inf"))
    return (scores.softmax(dim=-1) @ v).to(q.dtype)


# ----------------------------------------------------------------------------------------------
# Level 4: automatic prefix caching


def _check_token_ids(tokens) -> None:
    if (
        not isinstance(tokens, list)
        or not tokens
        or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens)
    ):
        got = f"{len(tokens)} items" if isinstance(tokens, list) else type(tokens).__name__
        raise ValueError(f"tokens: expected a non-empty list of ints (token ids), got {got}")


def _check_new_tokens(k, v, pool: torch.Tensor) -> None:
    """k and v: [Hkv, T, D] with T >= 1, alike, in the pool's dtype (pool: [blocks, Hkv, bs, D])."""
    _, Hkv, _, D = pool.shape
    for name, x in (("k", k), ("v", v)):
        shape = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or (Hkv, D) != (x.shape[0], x.shape[2]):
            raise ValueError(
                f"{name}: expected shape [{Hkv}, T, {D}] (kv heads, T >= 1 new tokens, head_dim), "
                f"got {shape}"
            )
        if x.shape[1] < 1 or x.shape != k.shape:
            raise ValueError(f"{name}: expected T >= 1 tokens, as many in k as in v; got {shape}")
        if x.dtype != pool.dtype:
            raise ValueError(f"{name}: expected dtype {pool.dtype}, got {x.dtype}")


class PrefixCache:
    """A paged cache (one layer's pool) whose full blocks are shared by equal prefixes.

    Storage as PagedKVCache's: k_pool, v_pool of shape (num_blocks, Hkv, block_size, D). A block
    that fills up is registered under its key, (the key of the block before it, its block_size
    tokens): a chain that names the whole prefix up to the block's end, so equal tokens after
    different prefixes get different keys. `start` hands a new sequence the registered blocks of
    its prompt's longest cached run of full blocks, and each block counts the sequences holding
    it. A block nobody holds waits in the free queue, least recently freed at the front, with its
    key and contents, until `append` takes it for new tokens.
    """

    def __init__(
        self, num_blocks, block_size, n_kv_heads, head_dim, dtype=torch.float32, device="cpu"
    ):
        _check_positive(
            num_blocks=num_blocks, block_size=block_size, n_kv_heads=n_kv_heads, head_dim=head_dim
        )
        _check_dtype(dtype)
        self.block_size = block_size
        pool = (num_blocks, n_kv_heads, block_size, head_dim)  # (blocks, Hkv, block_size, D)
        self.k_pool = torch.zeros(pool, dtype=dtype, device=device)
        self.v_pool = torch.zeros(pool, dtype=dtype, device=device)
        self.queue = OrderedDict.fromkeys(range(num_blocks))  # free blocks; the front goes first
        self.refs = [0] * num_blocks  # sequences holding each block
        self.cached: dict = {}  # key -> the block registered under it
        self.key_of: dict = {}  # registered block -> its key
        self.tables: dict = {}  # seq_id -> its blocks
        self.lengths: dict = {}  # seq_id -> tokens held
        self.last_key: dict = {}  # seq_id -> the key of its last full block (None: none yet)
        self.tail: dict = {}  # seq_id -> the token ids in its partial last block

    @property
    def num_blocks(self) -> int:
        return self.k_pool.shape[0]

    @property
    def num_free_blocks(self) -> int:
        return len(self.queue)

    def block_table(self, seq_id) -> list:
        return list(self.tables.get(seq_id, ()))

    def length(self, seq_id) -> int:
        return self.lengths.get(seq_id, 0)

    def ref_count(self, block) -> int:
        if not isinstance(block, int) or isinstance(block, bool) or not 0 <= block < len(self.refs):
            raise ValueError(f"block: expected an int in 0..{len(self.refs) - 1}, got {block!r}")
        return self.refs[block]

    def _cached_run(self, tokens: list) -> tuple[list, object]:
        """The registered blocks of the leading full blocks of `tokens`, up to the first one not
        cached, never the block of the last token; and the key of the last one found."""
        bs, found, key = self.block_size, [], None
        for i in range((len(tokens) - 1) // bs):  # the last token is always fed, for its logits
            following = (key, tuple(tokens[i * bs : (i + 1) * bs]))
            if following not in self.cached:
                break
            key = following
            found.append(self.cached[key])
        return found, key

    def match(self, tokens) -> int:
        """How many leading tokens of `tokens` are cached in full blocks; changes nothing."""
        _check_token_ids(tokens)
        return len(self._cached_run(tokens)[0]) * self.block_size

    def start(self, seq_id, tokens) -> int:
        """A new sequence holding the cached blocks of its prompt; returns the tokens they hold."""
        if seq_id in self.tables:
            raise ValueError(f"seq_id: sequence {seq_id!r} exists already (free it first)")
        _check_token_ids(tokens)
        found, key = self._cached_run(tokens)
        for block in found:
            self.refs[block] += 1
            self.queue.pop(block, None)  # a free one is held again: it leaves the queue
        self.tables[seq_id] = found
        self.lengths[seq_id] = len(found) * self.block_size
        self.last_key[seq_id] = key
        self.tail[seq_id] = []
        return len(found) * self.block_size

    def _take(self) -> int:
        """The block at the front of the free queue, forgetting what it cached."""
        block, _ = self.queue.popitem(last=False)
        key = self.key_of.pop(block, None)
        if key is not None:
            del self.cached[key]
        self.refs[block] = 1
        return block

    def append(self, seq_id, tokens, k, v) -> None:
        """Append T tokens (ids `tokens`, keys k and values v of shape [Hkv, T, D]) to `seq_id`."""
        _check_new_tokens(k, v, self.k_pool)
        _check_token_ids(tokens)
        T = k.shape[1]
        if len(tokens) != T:
            raise ValueError(
                f"tokens: expected {T} token ids, one per token of k and v, got {len(tokens)}"
            )
        bs = self.block_size
        length, held = self.length(seq_id), self.tables.get(seq_id, [])
        more = -(-(length + T) // bs) - len(held)  # new blocks: ceil((length + T) / bs) - held
        if more > len(self.queue):  # refuse before taking any: nothing changes
            raise OutOfBlocks(
                f"sequence {seq_id!r} needs {more} more block(s) of {bs} tokens but the pool has "
                f"{len(self.queue)} free of {self.num_blocks}; free a sequence first"
            )
        table = held + [self._take() for _ in range(more)]
        positions = torch.arange(length, length + T, device=self.k_pool.device)
        blocks = torch.tensor(table, device=self.k_pool.device)[positions // bs]  # (T,)
        self.k_pool[blocks, :, positions % bs] = k.transpose(0, 1)  # (T, Hkv, D) into the pool
        self.v_pool[blocks, :, positions % bs] = v.transpose(0, 1)
        self.tables[seq_id], self.lengths[seq_id] = table, length + T
        key, tail = self.last_key.get(seq_id), self.tail.get(seq_id, []) + tokens
        for i in range(length // bs, (length + T) // bs):  # the blocks this append filled
            key, tail = (key, tuple(tail[:bs])), tail[bs:]
            if key not in self.cached:  # a block already registered under the key stays
                self.cached[key] = table[i]
                self.key_of[table[i]] = key
        self.last_key[seq_id], self.tail[seq_id] = key, tail

    def gather(self, seq_id):
        """Everything cached for `seq_id`, in order: k, v of shape [Hkv, length, D]."""
        if seq_id not in self.tables:
            raise ValueError(f"seq_id: unknown sequence {seq_id!r} (never started, or freed)")
        blocks = torch.tensor(self.tables[seq_id], dtype=torch.long, device=self.k_pool.device)
        n = self.lengths[seq_id]
        # (blocks, Hkv, bs, D) -> (Hkv, blocks * bs, D) -> (Hkv, n, D)
        k = self.k_pool[blocks].transpose(0, 1).flatten(1, 2)[:, :n]
        v = self.v_pool[blocks].transpose(0, 1).flatten(1, 2)[:, :n]
        return k, v

    def free(self, seq_id) -> None:
        """Let go of every block of `seq_id`; one no sequence holds joins the free queue's back."""
        if seq_id not in self.tables:
            raise ValueError(f"seq_id: unknown sequence {seq_id!r} (never started, or freed)")
        for block in reversed(self.tables.pop(seq_id)):  # the end is evicted before the start
            self.refs[block] -= 1
            if self.refs[block] == 0:
                self.queue[block] = None  # a full block keeps its key; a partial one has none
        for per_sequence in (self.lengths, self.last_key, self.tail):
            del per_sequence[seq_id]
