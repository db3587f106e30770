"""Bug: linear attention uses phi(x) = elu(x) instead of elu(x) + 1.

Without the +1 features can be negative or zero, so phi(q)·z can vanish or change sign: the
"+1" is what keeps every weight positive.
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
    _rope,
    _softmax_or_zeros,
    _softmax_scale,
    block_sparse_attention,
    global_block_mask,
    local_block_mask,
    random_block_mask,
    sliding_window_attention,
    sliding_window_decode_step,
)


def _phi(x):
    return F.elu(x)  # BUG: elu alone, without the + 1


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


def linear_attention_step(q_t, k_t, v_t, state=None):
    """One decoding step of causal linear attention.

    q_t (B, H, D), k_t (B, Hkv, D), v_t (B, Hkv, Dv); state (S (B, H, D, Dv), z (B, H, D)) in
    float32, None before the first token. Adds phi(k_t) v_tᵀ to S and phi(k_t) to z, then reads
    o_t = phi(q_t)ᵀ S / phi(q_t)ᵀ z. Returns (o_t (B, H, Dv) in q_t's dtype, the new state);
    the state passed in is left untouched.
    """
    for name, t in (("q_t", q_t), ("k_t", k_t), ("v_t", v_t)):
        if not isinstance(t, torch.Tensor) or t.dim() != 3 or not t.is_floating_point():
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a 3-D float tensor [B, heads, D], got {got}")
    B, H, D = q_t.shape
    Hkv, Dv = k_t.shape[1], v_t.shape[2]
    if k_t.shape != (B, Hkv, D) or H % Hkv or v_t.shape[:2] != (B, Hkv):
        raise ValueError(
            f"k_t must be [B={B}, Hkv, D={D}] with Hkv dividing H={H}, and v_t [B, Hkv, Dv]; "
            f"got k_t {tuple(k_t.shape)}, v_t {tuple(v_t.shape)}"
        )
    acc = _compute_dtype(q_t.dtype)
    if state is None:
        S = torch.zeros(B, H, D, Dv, dtype=acc, device=q_t.device)
        z = torch.zeros(B, H, D, dtype=acc, device=q_t.device)
    else:
        S, z = state
        if S.shape != (B, H, D, Dv) or z.shape != (B, H, D):
            raise ValueError(
                f"state must be (S [{B}, {H}, {D}, {Dv}], z [{B}, {H}, {D}]), "
                f"got S {tuple(S.shape)}, z {tuple(z.shape)}"
            )
    fq = _phi(q_t.to(acc))  # (B, H, D)
    fk = _expand_kv(_phi(k_t.to(acc)), H)  # (B, H, D)
    v_t = _expand_kv(v_t.to(acc), H)  # (B, H, Dv)
    S = S + fk[..., :, None] * v_t[..., None, :]  # (B, H, D, Dv): new tensors, state untouched
    z = z + fk
    o_t = (fq[..., None, :] @ S).squeeze(-2) / (fq * z).sum(dim=-1, keepdim=True)
    return o_t.to(q_t.dtype), (S, z)
