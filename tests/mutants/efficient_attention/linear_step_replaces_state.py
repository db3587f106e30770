"""Bug: the recurrent step replaces the state with the new token's phi(k) vᵀ instead of adding it.

`S = ...` instead of `S = S + ...`: each step then only remembers the latest token.
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
    block_sparse_attention,
    global_block_mask,
    linear_attention,
    local_block_mask,
    random_block_mask,
    sliding_window_attention,
    sliding_window_decode_step,
)


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
    # BUG: changed from the reference below
    S = fk[..., :, None] * v_t[..., None, :]  # (B, H, D, Dv): new tensors, state untouched
    z = fk
    o_t = (fq[..., None, :] @ S).squeeze(-2) / (fq * z).sum(dim=-1, keepdim=True)
    return o_t.to(q_t.dtype), (S, z)
