"""Bug: causal=True skips blocks above the diagonal but does not mask inside the diagonal blocks.

Thinking at the level of blocks only, "causal" becomes "c <= r"; a query then still reads the
later keys of its own block.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from reference.efficient_attention import (  # noqa: F401
    _LINEAR_CHUNK,
    _MAX_QUERY_CHUNK,
    RollingKVCache,
    _causal_linear,
    _check_attention_inputs,
    _check_int,
    _compute_dtype,
    _exclusive_cumsum,
    _expand_kv,
    _key_span,
    _phi,
    _rope,
    _softmax_or_zeros,
    _softmax_scale,
    global_block_mask,
    linear_attention,
    linear_attention_step,
    local_block_mask,
    random_block_mask,
    sliding_window_attention,
    sliding_window_decode_step,
)


def block_sparse_attention(q, k, v, block_mask, block_size, causal=False, sm_scale=None):
    """Attention where query block r reads key block c only if block_mask[r, c].

    q (B, H, N, D), k (B, Hkv, N, D), v (B, Hkv, N, Dv); block_mask bool (nb, nb) with
    nb = ceil(N / block_size); the last block may be partial. With `causal`, query i also sees
    only keys j <= i. Returns (B, H, N, Dv). Work: 2 · bs² · (D + Dv) per allowed block and head.
    """
    _check_attention_inputs(q, k, v)
    B, H, N, D = q.shape
    if k.shape[2] != N:
        raise ValueError(f"k: block-sparse attention needs Nk == Nq = {N}, got Nk = {k.shape[2]}")
    _check_int("block_size", block_size, 1)
    bs = block_size
    nb = -(-N // bs)
    if not isinstance(block_mask, torch.Tensor) or block_mask.dtype != torch.bool:
        got = getattr(block_mask, "dtype", type(block_mask).__name__)
        raise ValueError(f"block_mask must be a bool tensor [{nb}, {nb}], got {got}")
    if tuple(block_mask.shape) != (nb, nb):
        raise ValueError(
            f"block_mask must be [{nb}, {nb}] (ceil(N / block_size) = ceil({N} / {bs})), "
            f"got {tuple(block_mask.shape)}"
        )
    acc = _compute_dtype(q.dtype)
    Dv = v.shape[3]

    def blocks(x: torch.Tensor) -> torch.Tensor:  # (B, h, N, d) -> (B, h, nb, bs, d), zero-padded
        return F.pad(x.to(acc), (0, 0, 0, nb * bs - N)).unflatten(2, (nb, bs))

    # One entry per allowed block, like a sparse matrix in coordinate form: (rows[i], cols[i]).
    rows, cols = block_mask.to(q.device).nonzero(as_tuple=True)  # (P,) each
    q_blocks = blocks(q)[:, :, rows]  # (B, H, P, bs, D)
    k_blocks = _expand_kv(blocks(k)[:, :, cols], H)  # (B, H, P, bs, D)
    v_blocks = _expand_kv(blocks(v)[:, :, cols], H)  # (B, H, P, bs, Dv)
    scores = (q_blocks @ k_blocks.transpose(-1, -2)) * _softmax_scale(sm_scale, D)  # (B,H,P,bs,bs)

    offsets = torch.arange(bs, device=q.device)
    query_pos = (rows[:, None] * bs + offsets)[:, :, None]  # (P, bs, 1)
    key_pos = (cols[:, None] * bs + offsets)[:, None, :]  # (P, 1, bs)
    allowed = key_pos < N  # the padding of the last block is no key
    if causal:
        # BUG: changed from the reference below
        allowed = allowed & (cols <= rows)[:, None, None]
    scores = scores.masked_fill(~allowed, float("-inf"))

    # The softmax of a query runs over every block of its row: take the row's maximum across
    # those blocks, then add up the exponentials and the weighted values block by block.
    index = rows[:, None].expand(-1, bs).expand(B, H, -1, -1)  # (B, H, P, bs)
    row_max = torch.full((B, H, nb, bs), float("-inf"), dtype=acc, device=q.device)
    row_max = row_max.scatter_reduce(2, index, scores.amax(dim=-1), reduce="amax")
    row_max = row_max.nan_to_num(neginf=0.0)  # rows that see nothing
    p = torch.exp(scores - row_max[:, :, rows, :, None])  # (B, H, P, bs, bs)
    denom = torch.zeros(B, H, nb, bs, dtype=acc, device=q.device).index_add(2, rows, p.sum(-1))
    numer = torch.zeros(B, H, nb, bs, Dv, dtype=acc, device=q.device)
    numer = numer.index_add(2, rows, p @ v_blocks)  # (B, H, nb, bs, Dv)
    out = numer / denom.clamp_min(1.0)[..., None]  # denom >= 1 wherever a key is seen
    return out.flatten(2, 3)[:, :, :N].to(q.dtype)
