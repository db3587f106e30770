"""Bug: causal linear attention makes the numerator causal but normalises by the sum over all keys.

The prefix sum is easy to remember for S and easy to forget for z.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from reference.efficient_attention import (  # noqa: F401
    _LINEAR_CHUNK,
    _MAX_QUERY_CHUNK,
    RollingKVCache,
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
    block_sparse_attention,
    global_block_mask,
    linear_attention_step,
    local_block_mask,
    random_block_mask,
    sliding_window_attention,
    sliding_window_decode_step,
)


def linear_attention(q, k, v, causal=True):
    """o_i = phi(q_i)ᵀ S_i / phi(q_i)ᵀ z_i, S_i = sum_j phi(k_j) v_jᵀ, z_i = sum_j phi(k_j).

    phi(x) = elu(x) + 1. With `causal`, j runs over j <= i + Nk - Nq; otherwise over all keys.
    q (B, H, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) -> (B, H, Nq, Dv).
    Work O(N · D²); the largest tensor is a chunk's C x C scores, never N x N.
    """
    _check_attention_inputs(q, k, v)
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    acc = _compute_dtype(q.dtype)
    fq = _phi(q.to(acc))  # (B, H, Nq, D)
    fk = _expand_kv(_phi(k.to(acc)), H)  # (B, H, Nk, D)
    v = _expand_kv(v.to(acc), H)  # (B, H, Nk, Dv)
    if not causal:
        S = fk.transpose(-1, -2) @ v  # (B, H, D, Dv)
        z = fk.sum(dim=2)  # (B, H, D)
        out = (fq @ S) / (fq @ z[..., None])
        return out.to(q.dtype)
    # The last n queries line up one to one with the last n keys; keys before them are a prefix
    # every one of these queries sees; queries before them see no key at all.
    n = min(Nq, Nk)
    prefix = Nk - n
    S0 = fk[:, :, :prefix].transpose(-1, -2) @ v[:, :, :prefix]  # (B, H, D, Dv)
    z0 = fk[:, :, :prefix].sum(dim=2)  # (B, H, D)
    out = _causal_linear(fq[:, :, Nq - n :], fk[:, :, prefix:], v[:, :, prefix:], S0, z0)
    return F.pad(out, (0, 0, Nq - n, 0)).to(q.dtype)


def _causal_linear(fq, fk, v, S0, z0):
    """Causal linear attention over aligned features fq, fk (B, H, n, D), v (B, H, n, Dv).

    S0 (B, H, D, Dv) and z0 (B, H, D) hold the keys that come before all of them.
    """
    B, H, n, _ = fq.shape
    C = min(_LINEAR_CHUNK, n)
    n_chunks = -(-n // C)

    def chunks(x):  # (B, H, n, d) -> (B, H, n_chunks, C, d); zero features add nothing
        return F.pad(x, (0, 0, 0, n_chunks * C - n)).unflatten(2, (n_chunks, C))

    fq, fk, v = chunks(fq), chunks(fk), chunks(v)
    # Inside a chunk: the quadratic form, keeping j <= i.
    A = (fq @ fk.transpose(-1, -2)).tril()  # (B, H, n_chunks, C, C)
    numer = A @ v  # (B, H, n_chunks, C, Dv)
    denom = A.sum(dim=-1)  # (B, H, n_chunks, C)
    # Across chunks: the state that every earlier chunk left behind.
    S = S0[:, :, None] + _exclusive_cumsum(fk.transpose(-1, -2) @ v, dim=2)  # (B,H,n_chunks,D,Dv)
    z = z0[:, :, None] + _exclusive_cumsum(fk.sum(dim=3), dim=2)  # (B, H, n_chunks, D)
    numer = numer + fq @ S
    # BUG: changed from the reference below
    z_all = z0 + fk.sum(dim=(2, 3))  # (B, H, D): every key, future ones too
    denom = (fq @ z_all[:, :, None, :, None]).squeeze(-1)
    return (numer.flatten(2, 3) / denom.flatten(2, 3)[..., None])[:, :, :n]
