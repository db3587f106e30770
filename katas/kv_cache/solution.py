"""The KV-cache kata: your solution. Read katas/kv_cache/README.md first.

Run the tests with `nox -s kv_cache` (or `pytest katas/kv_cache`); one level with
`nox -s kv_cache -- -k "1_cache"` (then "2_generate", "3_paged", "4_prefix").

Every call is checked by the harness (README, "Rules every call follows"):
- no argument is changed in place (tensors, lists);
- unchanged means bit for bit, layout and autograd state included, the models and modules you
  are given too (weights, buffers, train/eval mode), and also after the call has returned;
- an object given to read (paged_attention's cache) keeps its attributes as they were;
- the work is done with PyTorch on tensors (no NumPy, no DLPack, no bit-casts, no
  .tolist() or .item() of more than 256 float elements in a call);
- the work happens in the call's own thread (no threads or processes);
- results are plain torch.Tensor objects, never subclasses;
- the judge (the harness, the tests, Hypothesis's settings) is left alone, and PyTorch's global
  settings (grad mode, default dtype, ...) are as they were when a call returns;
- answers are computed when asked, never remembered from earlier calls (nor by the tensors'
  identity), and two calls never return the same tensor;
- a model's or module's weights may change in place between two calls: use the weights it
  holds at each call, keep nothing derived from them from one call to the next;
- the code behaves the same whether or not it is measured;
- generate decodes under torch.no_grad();
"""

from __future__ import annotations

import torch

# ----------------------------------------------------------------------------------------------
# Level 1: the memory arithmetic


def kv_cache_bytes(n_layers, n_kv_heads, head_dim, seq_len, batch_size, dtype) -> int:
    """Bytes needed to cache the keys and values of `batch_size` sequences of `seq_len` tokens:

        2 (keys and values) x n_layers x n_kv_heads x head_dim x seq_len x batch_size x itemsize

    where itemsize = dtype.itemsize, for any torch dtype (integer and 8-bit ones too). Returns an
    int.

    ValueError (naming the argument) when n_layers, n_kv_heads, head_dim or batch_size is not a
    positive int, when seq_len is not an int >= 0, or when dtype is not a torch.dtype.
    """
    # TODO(level 1): multiply it out, after checking the arguments.
    raise NotImplementedError("level 1: kv_cache_bytes is not implemented yet")


# ----------------------------------------------------------------------------------------------
# Level 1: a contiguous, preallocated cache


class KVCache:
    """Keys and values of every layer, preallocated for `max_seq_len` tokens.

    Holds exactly kv_cache_bytes(n_layers, n_kv_heads, head_dim, max_seq_len, batch_size, dtype)
    bytes of tensors, from construction on, however much is appended. dtype: a float type, or an
    8-bit one of quantised caches (int8, uint8, float8_e4m3fn, float8_e5m2), stored bit for bit.

    ValueError (naming the argument) when n_layers, batch_size, n_kv_heads, head_dim or
    max_seq_len is not a positive int, or when dtype is not a torch.dtype.
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
        # TODO(level 1): allocate keys and values (n_layers, B, n_kv_heads, max_seq_len, head_dim)
        # once, and a length per layer.
        raise NotImplementedError("level 1: KVCache is not implemented yet")

    @property
    def seq_len(self) -> int:
        """Tokens cached so far (counted on layer 0)."""
        # TODO(level 1): the length of layer 0.
        raise NotImplementedError("level 1: KVCache.seq_len is not implemented yet")

    def update(self, layer, k, v):
        """Append k, v to `layer`; return (k_all, v_all), everything cached for that layer.

        k, v: [B, n_kv_heads, T, head_dim] with T >= 1, in the cache's dtype, any strides.
        k_all, v_all: [B, n_kv_heads, L + T, head_dim] where L is what `layer` held before.
        Copy k and v into the preallocated storage (the caller may reuse its tensors) and return
        views of it: never copy the past (no torch.cat, no tensor as large as what is cached).

        ValueError, before anything is written:
        - layer not an int in 0..n_layers - 1 (the message names `layer`);
        - k or v not of shape [B, n_kv_heads, T, head_dim] with T >= 1, or of different lengths
          (names k or v and the expected shape, e.g. "k: expected shape [2, 4, T, 16], got
          [2, 3, 1, 16]");
        - k or v not in the cache's dtype (names k or v);
        - L + T > max_seq_len (names max_seq_len).
        """
        # TODO(level 1): check, write at this layer's own length, return views.
        raise NotImplementedError("level 1: KVCache.update is not implemented yet")

    def crop(self, length) -> None:
        """Forget everything after the first `length` tokens, in every layer (a rollback).

        A layer holding fewer than `length` tokens (a crop between the layers' updates of one
        step) keeps all it holds: a crop never lengthens a layer.

        ValueError (naming `length`) unless length is an int in 0..seq_len.
        """
        # TODO(level 1): shorten every layer's length; the storage stays as it is.
        raise NotImplementedError("level 1: KVCache.crop is not implemented yet")


# ----------------------------------------------------------------------------------------------
# Level 2: greedy generation with the cache


def generate(model, prompt_ids, max_new_tokens):
    """Greedy decoding with a KVCache: returns LongTensor [B, T + max_new_tokens].

    model(ids, cache) -> logits [B, T, vocab_size]. Make one KVCache in the model's dtype, call
    the model once on the whole prompt, then exactly once per further token, feeding only the
    newest token. max_new_tokens=0 returns the prompt. T + max_new_tokens may equal
    model.config.max_seq_len.

    ValueError, before the model is called:
    - prompt_ids not a LongTensor [B, T] with B, T >= 1, or holding an id outside
      0..vocab_size - 1 (names prompt_ids);
    - max_new_tokens not an int >= 0 (names max_new_tokens);
    - T + max_new_tokens > model.config.max_seq_len (names max_seq_len).
    """
    # TODO(level 2): prefill, then one token at a time, under torch.no_grad().
    raise NotImplementedError("level 2: generate is not implemented yet")


# ----------------------------------------------------------------------------------------------
# Level 3: a paged cache


class OutOfBlocks(RuntimeError):
    """The block pool has no free block left."""


class PagedKVCache:
    """One layer's keys and values in fixed-size blocks drawn from a shared pool.

    Attributes k_pool, v_pool: the pool, (num_blocks, n_kv_heads, block_size, head_dim) each, in
    `dtype` (a float or 8-bit type, as for KVCache); the cache holds no other tensor. Each
    sequence owns a block table, a list of physical block numbers: its token t lives in
    k_pool[table[t // block_size], :, t % block_size]. A sequence takes a block from the pool
    only when it needs one, and `free` gives them all back.

    ValueError (naming the argument) when num_blocks, block_size, n_kv_heads or head_dim is not a
    positive int, or when dtype is not a torch.dtype.
    """

    def __init__(
        self, num_blocks, block_size, n_kv_heads, head_dim, dtype=torch.float32, device="cpu"
    ):
        # TODO(level 3): allocate k_pool and v_pool, a free list, and per-sequence tables.
        raise NotImplementedError("level 3: PagedKVCache is not implemented yet")

    @property
    def num_blocks(self) -> int:
        """Blocks in the pool, free or used."""
        # TODO(level 3): the pool's first dimension.
        raise NotImplementedError("level 3: PagedKVCache.num_blocks is not implemented yet")

    @property
    def num_free_blocks(self) -> int:
        """Blocks no sequence holds."""
        # TODO(level 3): the length of the free list.
        raise NotImplementedError("level 3: PagedKVCache.num_free_blocks is not implemented yet")

    def block_table(self, seq_id) -> list:
        """The physical blocks of `seq_id`, in order ([] for an unknown sequence).

        A new list on every call: the caller may change it without changing the cache.
        """
        # TODO(level 3): a copy of the sequence's table.
        raise NotImplementedError("level 3: PagedKVCache.block_table is not implemented yet")

    def length(self, seq_id) -> int:
        """Tokens cached for `seq_id` (0 for an unknown sequence)."""
        # TODO(level 3): the sequence's length.
        raise NotImplementedError("level 3: PagedKVCache.length is not implemented yet")

    def append(self, seq_id, k, v) -> None:
        """Append k, v of shape [n_kv_heads, T, head_dim] to `seq_id` (created on first append).

        Each token is copied into k_pool / v_pool at (table[t // block_size], t % block_size).
        OutOfBlocks (a RuntimeError mentioning blocks) when the sequence needs more new blocks
        than are free; then nothing changes: no block taken, no sequence created.

        ValueError (names k or v and the expected shape), before anything changes, when k or v is
        not of shape [n_kv_heads, T, head_dim] with T >= 1, when their lengths differ, or when
        either is not in the pool's dtype.
        """
        # TODO(level 3): count the blocks needed first, then take them, then scatter the tokens.
        raise NotImplementedError("level 3: PagedKVCache.append is not implemented yet")

    def gather(self, seq_id):
        """Everything cached for `seq_id`, in order: k, v, each [n_kv_heads, length, head_dim].

        ValueError (naming seq_id) for a sequence never appended, or already freed.
        """
        # TODO(level 3): index the pool with the block table, then cut at the length.
        raise NotImplementedError("level 3: PagedKVCache.gather is not implemented yet")

    def free(self, seq_id) -> None:
        """Return every block of `seq_id` to the pool and forget the sequence.

        The id may be appended to again later: it then starts a new, empty sequence (nothing of
        the freed one is read back, by gather or paged_attention).
        ValueError (naming seq_id) for a sequence never appended, or already freed.
        """
        # TODO(level 3): give every block back.
        raise NotImplementedError("level 3: PagedKVCache.free is not implemented yet")


def paged_attention(q, cache, seq_id):
    """Causal attention of q [H, Tq, D] over the keys cached for `seq_id`, bottom-right aligned:

        out[h, i] = softmax_j(q[h, i] · k[g, j] / sqrt(D), j <= i + N - Tq) @ v[g, :]

    with N = cache.length(seq_id) and g = h // (H // n_kv_heads) (grouped-query attention). The
    cache already holds the queries' own keys, so the last query sees every cached key. Computed
    in float32 (float64 for float64 input); returns [H, Tq, D] in q's dtype.

    ValueError naming seq_id for an unknown sequence; naming q when q is not [H, Tq, head_dim]
    with H a multiple of n_kv_heads and 1 <= Tq <= N, or not in the cache's dtype.
    """
    # TODO(level 3): gather, repeat the kv heads, mask, softmax in float32.
    raise NotImplementedError("level 3: paged_attention is not implemented yet")


# ----------------------------------------------------------------------------------------------
# Level 4: automatic prefix caching


class PrefixCache:
    """One layer's paged cache whose full blocks are shared by sequences with equal prefixes.

    Storage as PagedKVCache's: k_pool, v_pool of shape (num_blocks, n_kv_heads, block_size,
    head_dim), the only tensors the cache holds; token t of a sequence lives at
    (table[t // block_size], t % block_size). The rules (README, level 4), with bs = block_size:

    - A full block's key is (the key of the block before it, its bs token ids): the whole prefix
      up to its end. The append that fills a block registers it under its key, unless a block is
      registered under that key already (that one stays; the new one stays private).
    - Only full blocks are shared; a partial last block is its sequence's own. A block is never
      written while another sequence holds it.
    - The free queue holds blocks 0..num_blocks - 1 in order at first. append takes new blocks
      from its FRONT (a taken block forgets its key); free puts each block whose ref count reaches
      0 at its BACK, the sequence's last block first. A full block in the queue keeps its contents
      and key until taken: match and start still find it. num_free_blocks is the queue's length,
      cached blocks included.
    - The cache keeps no reference to the lists it is given.

    ValueError (naming the argument) when num_blocks, block_size, n_kv_heads or head_dim is not a
    positive int, or when dtype is not a torch.dtype.
    """

    def __init__(
        self, num_blocks, block_size, n_kv_heads, head_dim, dtype=torch.float32, device="cpu"
    ):
        # TODO(level 4): the pool, the free queue (collections.OrderedDict keeps an order and
        # removes from the middle), ref counts, key -> block, and per-sequence tables.
        raise NotImplementedError("level 4: PrefixCache is not implemented yet")

    @property
    def num_blocks(self) -> int:
        """Blocks in the pool, free or held."""
        # TODO(level 4): the pool's first dimension.
        raise NotImplementedError("level 4: PrefixCache.num_blocks is not implemented yet")

    @property
    def num_free_blocks(self) -> int:
        """Blocks in the free queue (no sequence holds them; cached ones included)."""
        # TODO(level 4): the free queue's length.
        raise NotImplementedError("level 4: PrefixCache.num_free_blocks is not implemented yet")

    def block_table(self, seq_id) -> list:
        """The physical blocks of `seq_id`, in order ([] for an unknown sequence); a new list on
        every call."""
        # TODO(level 4): a copy of the sequence's table.
        raise NotImplementedError("level 4: PrefixCache.block_table is not implemented yet")

    def length(self, seq_id) -> int:
        """Tokens held for `seq_id` (0 for an unknown sequence)."""
        # TODO(level 4): the sequence's length.
        raise NotImplementedError("level 4: PrefixCache.length is not implemented yet")

    def ref_count(self, block) -> int:
        """How many sequences hold physical block `block` (0: it is free).

        ValueError (naming block) unless block is an int in 0..num_blocks - 1.
        """
        # TODO(level 4): the block's count.
        raise NotImplementedError("level 4: PrefixCache.ref_count is not implemented yet")

    def match(self, tokens) -> int:
        """How many leading tokens of `tokens` (a non-empty list of ints) sit in cached full blocks.

        Block i (tokens[i * bs : (i + 1) * bs]) counts when a block is registered under its key;
        the count stops at the first that is not. Never the block of the last token (always fed
        to the model, for its logits): a multiple of bs, at most ((len(tokens) - 1) // bs) * bs.
        Changes nothing, not even the free queue's order.

        ValueError (naming tokens) when tokens is not a non-empty list of ints (bools excluded).
        """
        # TODO(level 4): walk the keys block by block while they are registered.
        raise NotImplementedError("level 4: PrefixCache.match is not implemented yet")

    def start(self, seq_id, tokens) -> int:
        """A new sequence whose prompt is `tokens`; returns n, the tokens of its cached blocks.

        The blocks match finds become its first blocks, in order: each one's ref count goes up by
        1 and a free one leaves the free queue. Its length is n; the caller then appends
        tokens[n:]. Nothing is written into the pool: the cost does not grow with n. Never
        raises OutOfBlocks.

        ValueError, before anything changes: seq_id exists (started or appended to, not freed
        since; names seq_id); tokens not a non-empty list of ints (names tokens).
        """
        # TODO(level 4): take the cached blocks, no copying.
        raise NotImplementedError("level 4: PrefixCache.start is not implemented yet")

    def append(self, seq_id, tokens, k, v) -> None:
        """Append T tokens to `seq_id` (an unknown id starts empty): their ids `tokens` (a list of
        T ints) and k, v of shape [n_kv_heads, T, head_dim] in the pool's dtype.

        In this order: check the arguments; count the new blocks needed (ceil((length + T) / bs)
        minus the blocks held) and raise OutOfBlocks, changing nothing, when the free queue is
        shorter; take them from the front of the free queue, in table order (each forgets its
        key); write the tokens; register each block this append filled, first to last.

        ValueError (naming k, v or tokens, and the expected shape), before anything changes, when
        k or v is not [n_kv_heads, T, head_dim] with T >= 1, when their lengths differ, when
        either is not in the pool's dtype, or when tokens is not a list of T ints.
        """
        # TODO(level 4): as level 3's append, then register the blocks that became full.
        raise NotImplementedError("level 4: PrefixCache.append is not implemented yet")

    def gather(self, seq_id):
        """Everything held for `seq_id`, in order: k, v, each [n_kv_heads, length, head_dim],
        read from the pool at the sequence's blocks.

        ValueError (naming seq_id) for a sequence never started nor appended, or already freed.
        """
        # TODO(level 4): index the pool with the block table, then cut at the length.
        raise NotImplementedError("level 4: PrefixCache.gather is not implemented yet")

    def free(self, seq_id) -> None:
        """Let go of every block of `seq_id` and forget the sequence (its id may be started again).

        Each block's ref count goes down by 1; each that reaches 0 joins the back of the free
        queue, from the sequence's last block to its first. A full one keeps its key and contents
        until taken again; a partial one is found by nothing.
        ValueError (naming seq_id) for a sequence never started nor appended, or already freed.
        """
        # TODO(level 4): lower the counts, last block first; queue those at 0.
        raise NotImplementedError("level 4: PrefixCache.free is not implemented yet")
