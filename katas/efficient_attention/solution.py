"""Efficient attention: make the cost follow who attends to whom, not N².

Your file. Fill in each function; `pytest katas/efficient_attention` checks it (README.md first).

Conventions (the same as the FlashAttention kata):
- q (B, H, Nq, D); k (B, Hkv, Nk, D); v (B, Hkv, Nk, Dv); H % Hkv == 0 and query head h reads
  kv head h // (H // Hkv) (grouped-query attention).
- Causal masks are aligned bottom-right: query i sits at position p = i + Nk - Nq.
- A query that sees no key returns zeros (never NaN).
- sm_scale defaults to 1 / sqrt(D) when it is None; any other value (0.0 too) scales as given.
- Inputs come in float32, float16 or bfloat16; outputs have q's dtype; do the arithmetic in
  float32, and keep the softmax stable (scores may reach the thousands). Every visible score may
  lie below any finite mask constant (about -1e30): hidden keys get -inf. float64 inputs give
  float64 outputs (computed in float32 or float64).
- Positions and indices run past 32767 (and past 2048, where float16 skips integers): make them
  with torch.arange, in int64.
- Inputs may be non-contiguous views, k and v with different strides; they are never modified.
- Bad input raises ValueError naming the argument and the shape expected. The three attention
  functions all reject: q, k or v that is not a non-empty 4-D float tensor (no size 0); k whose
  batch or D differs from q's, or whose Hkv heads do not divide H; v whose batch, heads or
  length differ from k's; q, k and v that do not share one dtype and one device.

Every call is checked by the harness (README, "Rules every call follows"):
- no argument is changed in place (tensors, lists), nor written to during the call (even if put
  back);
- unchanged means bit for bit, layout and autograd state included, the models and modules you
  are given too (weights, buffers, train/eval mode), and also after the call has returned;
- the work is done with PyTorch on tensors (no NumPy, no DLPack, no bit-casts, no
  .tolist() or .item() of more than 256 float elements in a call);
- the work happens in the call's own thread (no threads or processes);
- results are plain torch.Tensor objects, never subclasses;
- the judge (the harness, the tests, Hypothesis's settings) is left alone, and PyTorch's global
  settings (grad mode, default dtype, ...) are as they were when a call returns;
- every call is held to a budget of work (elementwise products and sums count too);
- answers are computed when asked, never remembered from earlier calls (nor by the tensors'
  identity), and two calls never return the same tensor;
- the code behaves the same whether or not it is measured;
- no function calls PyTorch's fused attention (scaled_dot_product_attention);
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
    Work and memory O(Nq · window · D) at every window, 1 included: never build an Nq x Nk
    tensor, not even a mask, nor score every pair by broadcasting.
    ValueError: the checks of the module docstring; `window` that is not an int >= 1.
    """
    # TODO(level 1): score chunks of at most `window` queries against their band of keys only.
    raise NotImplementedError("level 1: sliding_window_attention is not implemented yet")


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
    and head, at every block size, never the dense product masked afterwards.
    ValueError: the checks of the module docstring; Nk != Nq; `block_size` that is not an int
    >= 1; `block_mask` that is not a bool tensor of shape (nb, nb).
    """
    # TODO(level 2): gather the allowed (query block, key block) pairs and score only those.
    raise NotImplementedError("level 2: block_sparse_attention is not implemented yet")


# ----------------------------------------------------------------------------------------------
# Level 3: linear attention


def linear_attention(q, k, v, causal=True):
    """Attention with the kernel phi(q)·phi(k) instead of exp(q·k), phi(x) = elu(x) + 1.

        o_i = phi(q_i)ᵀ S_i / phi(q_i)ᵀ z_i,   S_i = sum_j phi(k_j) v_jᵀ (D x Dv),
                                               z_i = sum_j phi(k_j)      (D)

    With `causal` the sums run over j <= i + Nk - Nq (bottom-right); otherwise over all keys.
    No sm_scale: phi replaces the softmax. q (B, H, Nq, D), k (B, Hkv, Nk, D),
    v (B, Hkv, Nk, Dv) -> (B, H, Nq, Dv).
    Work O(N · D²); never an N x N tensor (chunks of C x C are fine). Sums in float32.
    ValueError: the checks of the module docstring.
    """
    # TODO(level 3): prefix sums of phi(k) v^T, or chunks plus a carried state.
    raise NotImplementedError("level 3: linear_attention is not implemented yet")


def linear_attention_step(q_t, k_t, v_t, state=None):
    """One decoding step of causal linear attention (its recurrent form).

    q_t (B, H, D), k_t (B, Hkv, D), v_t (B, Hkv, Dv).
    state = (S (B, H, D, Dv), z (B, H, D)) in float32 whatever the inputs' dtype (float64 inputs
    may keep it in float64), or None before the first token.

        S <- S + phi(k_t) v_tᵀ,   z <- z + phi(k_t),   o_t = phi(q_t)ᵀ S / phi(q_t)ᵀ z

    Returns (o_t (B, H, Dv) in q_t's dtype, the new state). Memory does not grow with the
    number of steps, and thousands of steps still match linear_attention; the state passed in
    is not modified. Several streams may decode in turn, states of the same shape included:
    the state returned is the caller's, never storage a later call writes again, and the caller
    may resume from any state it kept, however many steps back and however many are alive.
    ValueError: q_t, k_t or v_t that is not a non-empty 3-D float tensor; k_t not (B, Hkv, D)
    with Hkv dividing H, or v_t not (B, Hkv, Dv); q_t, k_t and v_t of different dtypes or
    devices; a state whose S is not (B, H, D, Dv) or whose z is not (B, H, D) (a z that would
    broadcast included).
    """
    # TODO(level 3): the recurrent step.
    raise NotImplementedError("level 3: linear_attention_step is not implemented yet")


# ----------------------------------------------------------------------------------------------
# Level 4: BigBird-style block patterns


def local_block_mask(n_blocks, radius, *, causal=False):
    """bool (n_blocks, n_blocks): block r sees c iff |r - c| <= radius (and c <= r if causal).

    ValueError: n_blocks that is not an int >= 1; radius that is not an int >= 0.
    """
    # TODO(level 4): the local band.
    raise NotImplementedError("level 4: local_block_mask is not implemented yet")


def global_block_mask(n_blocks, n_global):
    """bool (n_blocks, n_blocks): the first n_global blocks read every block and are read by all.

    True in the first n_global rows and the first n_global columns.
    ValueError: n_blocks that is not an int >= 1; n_global that is not an int in 0..n_blocks.
    """
    # TODO(level 4): the global rows and columns.
    raise NotImplementedError("level 4: global_block_mask is not implemented yet")


def random_block_mask(n_blocks, n_random, *, seed):
    """bool (n_blocks, n_blocks): each row reads n_random distinct key blocks drawn at random.

    Rows draw independently and uniformly, from a torch.Generator seeded with `seed`: each row's
    set is a uniform draw among the sets of n_random distinct blocks, independent of the other
    rows (never a shift or copy of another row's draw); the same seed gives the same mask
    whatever the global random state.
    ValueError: n_blocks that is not an int >= 1; n_random that is not an int in 0..n_blocks.
    """
    # TODO(level 4): the random blocks.
    raise NotImplementedError("level 4: random_block_mask is not implemented yet")


# ----------------------------------------------------------------------------------------------
# Level 5: decoding with a rolling window of keys


class RollingKVCache:
    """The last `window` keys and values of one attention layer, in a ring buffer.

    Holds k and v of shape (batch, n_kv_heads, window, head_dim) in `dtype` and nothing that
    grows: the token at absolute position p goes to slot p % window, over the oldest one.
    ValueError: window, batch, n_kv_heads or head_dim that is not an int >= 1.
    """

    def __init__(self, window, batch, n_kv_heads, head_dim, *, dtype=torch.float32, device=None):
        # TODO(level 5): check the sizes and allocate the two buffers.
        raise NotImplementedError("level 5: RollingKVCache is not implemented yet")

    @property
    def seq_len(self) -> int:
        """Tokens appended so far: the absolute position of the next token (past 32767 too)."""
        # TODO(level 5): count the tokens appended.
        raise NotImplementedError("level 5: RollingKVCache.seq_len is not implemented yet")

    def append(self, k_t, v_t):
        """Store one token's k_t, v_t (batch, n_kv_heads, head_dim).

        Returns the keys and values now in the window, (batch, n_kv_heads, min(seq_len, window),
        head_dim) each, in any order (attention does not care about the order of its keys).
        ValueError: k_t or v_t that is not (batch, n_kv_heads, head_dim).
        """
        # TODO(level 5): write slot seq_len % window and return the slots that hold a token.
        raise NotImplementedError("level 5: RollingKVCache.append is not implemented yet")


def sliding_window_decode_step(q_t, k_t, v_t, cache, *, rope_base=10000.0, sm_scale=None):
    """Decode one token with sliding-window attention over `cache` (window = cache's window).

    q_t (B, H, D), k_t and v_t (B, Hkv, D), before RoPE; D even. The token sits at absolute
    position p = cache.seq_len. Rotate q_t and k_t to p with RoPE in the layout of
    grading.model.apply_rope (angles p · rope_base^(-2i/D), halves rotated), append the rotated
    k_t and v_t to the cache, then attend with q_t over the keys it returns, scaled by sm_scale
    (1 / sqrt(D) when None). Returns o_t (B, H, D) in q_t's dtype: row p of
    sliding_window_attention over the rotated sequence, still exact after thousands of steps.
    Each cache is one stream: caches of the same shape, any number of them, may decode in turn,
    or one start after another; attend only over the keys of the cache given, keeping nothing
    between calls.
    ValueError: q_t, k_t or v_t that is not a non-empty 3-D tensor; q_t not (B, H, D) or k_t not
    (B, Hkv, D) (q_t's B and D) with Hkv dividing H; an odd D; v_t that does not fit the cache
    (from append); q_t, k_t and v_t of different dtypes or devices.
    """
    # TODO(level 5): rotate at the absolute position, append, attend.
    raise NotImplementedError("level 5: sliding_window_decode_step is not implemented yet")
