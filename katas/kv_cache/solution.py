"""The KV-cache kata: your solution. Read katas/kv_cache/README.md first.

Run the tests with `nox -s kv_cache` (or `pytest katas/kv_cache`).
"""

from __future__ import annotations

import torch

TODO = "not implemented yet — start with katas/kv_cache/README.md"


# Level 1: the memory arithmetic


def kv_cache_bytes(n_layers, n_kv_heads, head_dim, seq_len, batch_size, dtype) -> int:
    """Bytes needed to cache the keys and values of `batch_size` sequences of `seq_len` tokens.

    Every layer stores one key and one value vector of `head_dim` numbers per kv head per token,
    each number taking `dtype.itemsize` bytes. ValueError for sizes that make no sense.
    """
    # TODO: task 1
    raise NotImplementedError(TODO)


# Level 1: a contiguous, preallocated cache


class KVCache:
    """Keys and values of every layer, preallocated for `max_seq_len` tokens.

    update(layer, k, v): k, v are [B, n_kv_heads, T, head_dim]. Write them after what `layer`
    already holds and return everything cached for that layer, [B, n_kv_heads, L + T, head_dim].
    Storage is allocated once, here: no concatenation of the past per step.
    ValueError when an update would pass max_seq_len, when k or v have the wrong shape or dtype,
    or for an unknown layer. Each message names what is wrong and what was expected, e.g.
    "k: expected shape [2, 4, T, 16], got [2, 3, 1, 16]" or "layer: expected 0..1, got 5"; an
    overflow names max_seq_len, a bad crop names length.
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
        # TODO: task 2
        raise NotImplementedError(TODO)

    @property
    def seq_len(self) -> int:
        """Tokens cached so far (counted on layer 0)."""
        # TODO: task 2
        raise NotImplementedError(TODO)

    def update(self, layer, k, v):
        """Append k, v to `layer`; return (k_all, v_all) for that layer."""
        # TODO: task 2
        raise NotImplementedError(TODO)

    def crop(self, length) -> None:
        """Forget everything after the first `length` tokens, in every layer (a rollback)."""
        # TODO: task 3
        raise NotImplementedError(TODO)


# Level 1: greedy generation with the cache


def generate(model, prompt_ids, max_new_tokens):
    """Greedy decoding with a KVCache: returns LongTensor [B, T + max_new_tokens].

    One model call on the whole prompt, then exactly one call per further token, feeding only the
    newest token: model(ids, cache) -> logits [B, T, vocab_size].
    """
    # TODO: task 4
    raise NotImplementedError(TODO)


# Level 2: a paged cache


class OutOfBlocks(RuntimeError):
    """The block pool has no free block left."""


class PagedKVCache:
    """One layer's keys and values in fixed-size blocks drawn from a shared pool.

    Physical storage: (num_blocks, n_kv_heads, block_size, head_dim) for keys and for values.
    Each sequence owns a block table, a list of physical block numbers: its token t lives in
    block table[t // block_size] at offset t % block_size. A sequence takes a block from the pool
    only when it needs one, and `free` gives them all back. When the pool runs dry, `append`
    raises OutOfBlocks and changes nothing.
    """

    def __init__(
        self, num_blocks, block_size, n_kv_heads, head_dim, dtype=torch.float32, device="cpu"
    ):
        # TODO: task 5
        raise NotImplementedError(TODO)

    @property
    def num_blocks(self) -> int:
        """Blocks in the pool, free or used."""
        raise NotImplementedError(TODO)

    @property
    def num_free_blocks(self) -> int:
        """Blocks no sequence holds."""
        raise NotImplementedError(TODO)

    def block_table(self, seq_id) -> list:
        """The physical blocks of `seq_id`, in order ([] for an unknown sequence)."""
        raise NotImplementedError(TODO)

    def length(self, seq_id) -> int:
        """Tokens cached for `seq_id` (0 for an unknown sequence)."""
        raise NotImplementedError(TODO)

    def append(self, seq_id, k, v) -> None:
        """Append k, v of shape [n_kv_heads, T, head_dim] to `seq_id` (created on first append)."""
        raise NotImplementedError(TODO)

    def gather(self, seq_id):
        """Everything cached for `seq_id`, in order: k, v, each [n_kv_heads, length, head_dim]."""
        raise NotImplementedError(TODO)

    def free(self, seq_id) -> None:
        """Return every block of `seq_id` to the pool."""
        raise NotImplementedError(TODO)


def paged_attention(q, cache, seq_id):
    """Causal attention of q [H, Tq, D] over the keys cached for `seq_id`, bottom-right aligned.

    The cache already holds the queries' own keys, so the last query sees every cached key.
    Grouped-query: head h reads kv head h // (H // n_kv_heads). Returns [H, Tq, D], q's dtype.
    """
    # TODO: task 6
    raise NotImplementedError(TODO)
