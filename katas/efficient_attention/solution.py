"""Efficient attention: make the cost follow who attends to whom, not N².

Your file. Fill in each function; `pytest katas/efficient_attention` checks it (README.md first).

Conventions (the same as the FlashAttention kata):
- q (B, H, Nq, D); k (B, Hkv, Nk, D); v (B, Hkv, Nk, Dv); H % Hkv == 0 and query head h reads
  kv head h // (H // Hkv) (grouped-query attention).
- Causal masks are aligned bottom-right: query i sits at position p = i + Nk - Nq.
- A query that sees no key returns zeros (never NaN).
- sm_scale defaults to 1 / sqrt(D). Outputs have q's dtype; do the arithmetic in float32.
- Bad shapes raise ValueError naming the argument and the shape expected; inputs are never
  modified.
"""

from __future__ import annotations

import torch

# ----------------------------------------------------------------------------------------------
# Level 1: sliding window


def sliding_window_attention(q, k, v, window, sm_scale=None):
    """Causal attention over the last `window` keys.

    Query i, at position p = i + Nk - Nq, sees the keys j with p - window < j <= p: exactly
    `window` keys counting its own position (fewer at the start; none if p < 0).

        o_i = sum_j softmax_j(sm_scale · q_i·k_j) v_j     over those j only

    q (B, H, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) -> (B, H, Nq, Dv).
    Work and memory O(Nq · window · D): never build an Nq x Nk tensor, not even a mask.
    """
    # TODO(sliding window): score chunks of queries against their band of keys only.
    raise NotImplementedError(
        "not implemented yet — start with katas/efficient_attention/README.md"
    )


# ----------------------------------------------------------------------------------------------
# Level 2: block-sparse


def block_sparse_attention(q, k, v, block_mask, block_size, causal=False, sm_scale=None):
    """Attention where query block r reads key block c only if block_mask[r, c].

    q (B, H, N, D), k (B, Hkv, N, D), v (B, Hkv, N, Dv): one length N for all three.
    block_mask: bool (nb, nb) with nb = ceil(N / block_size); block r holds tokens
    r·block_size .. (r + 1)·block_size - 1, and the last block may be partial.
    With `causal`, query i also sees only keys j <= i (this matters inside diagonal blocks).
    The softmax of a query runs over all the keys of all its allowed blocks together.
    Returns (B, H, N, Dv).
    Work proportional to the number of allowed blocks: 2 · block_size² · (D + Dv) per block
    and head, never the dense product masked afterwards.
    """
    # TODO(block-sparse): gather the allowed (query block, key block) pairs and score only those.
    raise NotImplementedError(
        "not implemented yet — start with katas/efficient_attention/README.md"
    )


# ----------------------------------------------------------------------------------------------
# Level 3: linear attention


def linear_attention(q, k, v, causal=True):
    """Attention with the kernel phi(q)·phi(k) instead of exp(q·k), phi(x) = elu(x) + 1.

        o_i = phi(q_i)ᵀ S_i / phi(q_i)ᵀ z_i,   S_i = sum_j phi(k_j) v_jᵀ (D x Dv),
                                               z_i = sum_j phi(k_j)      (D)

    With `causal` the sums run over j <= i + Nk - Nq (bottom-right); otherwise over all keys.
    No sm_scale: phi replaces the softmax. q (B, H, Nq, D), k (B, Hkv, Nk, D),
    v (B, Hkv, Nk, Dv) -> (B, H, Nq, Dv).
    Work O(N · D²); never an N x N tensor (chunks of C x C are fine).
    """
    # TODO(linear attention): prefix sums of phi(k) v^T, or chunks plus a carried state.
    raise NotImplementedError(
        "not implemented yet — start with katas/efficient_attention/README.md"
    )


def linear_attention_step(q_t, k_t, v_t, state=None):
    """One decoding step of causal linear attention (its recurrent form).

    q_t (B, H, D), k_t (B, Hkv, D), v_t (B, Hkv, Dv).
    state = (S (B, H, D, Dv), z (B, H, D)) in float32, or None before the first token.

        S <- S + phi(k_t) v_tᵀ,   z <- z + phi(k_t),   o_t = phi(q_t)ᵀ S / phi(q_t)ᵀ z

    Returns (o_t (B, H, Dv) in q_t's dtype, the new state). Memory does not grow with the
    number of steps; the state passed in is not modified.
    """
    # TODO(linear attention): the recurrent step.
    raise NotImplementedError(
        "not implemented yet — start with katas/efficient_attention/README.md"
    )


# ----------------------------------------------------------------------------------------------
# Level 4: BigBird-style block patterns


def local_block_mask(n_blocks, radius, *, causal=False):
    """bool (n_blocks, n_blocks): block r sees c iff |r - c| <= radius (and c <= r if causal)."""
    # TODO(block patterns): the local band.
    raise NotImplementedError(
        "not implemented yet — start with katas/efficient_attention/README.md"
    )


def global_block_mask(n_blocks, n_global):
    """bool (n_blocks, n_blocks): the first n_global blocks read every block and are read by all.

    True in the first n_global rows and the first n_global columns. 0 <= n_global <= n_blocks.
    """
    # TODO(block patterns): the global rows and columns.
    raise NotImplementedError(
        "not implemented yet — start with katas/efficient_attention/README.md"
    )


def random_block_mask(n_blocks, n_random, *, seed):
    """bool (n_blocks, n_blocks): each row reads n_random distinct key blocks drawn at random.

    Rows draw independently and uniformly, from a torch.Generator seeded with `seed`: the same
    seed gives the same mask whatever the global random state. 0 <= n_random <= n_blocks.
    """
    # TODO(block patterns): the random blocks.
    raise NotImplementedError(
        "not implemented yet — start with katas/efficient_attention/README.md"
    )


# ----------------------------------------------------------------------------------------------
# Level 5: decoding with a rolling window of keys


class RollingKVCache:
    """The last `window` keys and values of one attention layer, in a ring buffer.

    Holds k and v of shape (batch, n_kv_heads, window, head_dim) in `dtype` and nothing that
    grows: the token at absolute position p goes to slot p % window, over the oldest one.
    """

    def __init__(self, window, batch, n_kv_heads, head_dim, *, dtype=torch.float32, device=None):
        # TODO(rolling cache): allocate the two buffers; ValueError unless every size is >= 1.
        raise NotImplementedError(
            "not implemented yet — start with katas/efficient_attention/README.md"
        )

    @property
    def seq_len(self) -> int:
        """Tokens appended so far: the absolute position of the next token."""
        # TODO(rolling cache)
        raise NotImplementedError(
            "not implemented yet — start with katas/efficient_attention/README.md"
        )

    def append(self, k_t, v_t):
        """Store one token's k_t, v_t (batch, n_kv_heads, head_dim); ValueError on other shapes.

        Returns the keys and values now in the window, (batch, n_kv_heads, min(seq_len, window),
        head_dim) each, in any order (attention does not care about the order of its keys).
        """
        # TODO(rolling cache)
        raise NotImplementedError(
            "not implemented yet — start with katas/efficient_attention/README.md"
        )


def sliding_window_decode_step(q_t, k_t, v_t, cache, *, rope_base=10000.0, sm_scale=None):
    """Decode one token with sliding-window attention over `cache` (window = cache's window).

    q_t (B, H, D), k_t and v_t (B, Hkv, D), before RoPE; D even. The token sits at absolute
    position p = cache.seq_len. Rotate q_t and k_t to p with RoPE in the layout of
    grading.model.apply_rope (angles p · rope_base^(-2i/D), halves rotated), append the rotated
    k_t and v_t to the cache, then attend with q_t over the keys it returns.
    Returns o_t (B, H, D) in q_t's dtype: row p of sliding_window_attention over the rotated
    sequence.
    """
    # TODO(rolling cache): rotate at the absolute position, append, attend.
    raise NotImplementedError(
        "not implemented yet — start with katas/efficient_attention/README.md"
    )
