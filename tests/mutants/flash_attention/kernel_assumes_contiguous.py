"""Bug: the launcher passes strides computed from the shapes, as if q, k and v were contiguous.

Tensors made in a quick test are contiguous, so flat offsets b*H*N*D + h*N*D + n*D + d work
there; q, k and v cut from one projection and viewed as (B, H, N, D) are not.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from reference.flash_attention import (
    _KERNEL_HEAD_DIMS,
    _LOG2E,
    _check_inputs,
    _softmax_scale,
    _tile_config,
    combine_partials,
    tiled_attention,
)


@triton.jit
def _attend_keys(
    acc, l_i, m_i, q, k_base, v_base,
    stride_kn, stride_kd, stride_vn, stride_vd,
    offs_m, lo, hi, causal_shift, sm_scale,
    MASKED: tl.constexpr, CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    """Fold keys [lo, hi) into (acc, l_i, m_i). MASKED: some keys may be invisible or padding."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    # The first key block as K^T (D, BLOCK_N) and V (BLOCK_N, D); both advance each iteration.
    k_ptrs = k_base + (lo + offs_n)[None, :] * stride_kn + offs_d[:, None] * stride_kd
    v_ptrs = v_base + (lo + offs_n)[:, None] * stride_vn + offs_d[None, :] * stride_vd
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n  # (BLOCK_N,) key positions
        if MASKED:
            kt = tl.load(k_ptrs, mask=cols[None, :] < hi, other=0.0)
            v = tl.load(v_ptrs, mask=cols[:, None] < hi, other=0.0)
        else:
            kt = tl.load(k_ptrs)
            v = tl.load(v_ptrs)
        s = tl.dot(q, kt, input_precision=DOT_PRECISION) * sm_scale  # (BLOCK_M, BLOCK_N)
        if MASKED:
            visible = cols[None, :] < hi  # padding past the range is not a key
            if CAUSAL:
                visible = visible & (cols[None, :] <= offs_m[:, None] + causal_shift)
            s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows that saw no key yet
        # exp(x) as exp2(x * log2(e)), applied to s - m: scaling the small difference rather
        # than s itself keeps float32 rounding of scores in the hundreds out of p.
        alpha = tl.math.exp2((m_i - m_safe) * _LOG2E)
        p = tl.math.exp2((s - m_safe[:, None]) * _LOG2E)  # (BLOCK_M, BLOCK_N), each <= 1
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PRECISION)
        m_i = m_new
        k_ptrs += BLOCK_N * stride_kn
        v_ptrs += BLOCK_N * stride_vn
    return acc, l_i, m_i


@triton.jit
def _attention_fwd_kernel(
    Q, K, V, Out, Lse,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_os, stride_ob, stride_oh, stride_om, stride_od,
    H, Nq, Nk, group, keys_per_split, sm_scale,
    CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    """Grid (query blocks, B*H, key splits): one block of queries of one head, one key range.

    Out is (splits, B, H, Nq, D) and Lse (splits, B, H, Nq), both indexed by the split.
    """
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    split = tl.program_id(2)
    b = (pid_bh // H).to(tl.int64)  # 64-bit offsets: long contexts overflow int32
    h = (pid_bh % H).to(tl.int64)
    h_kv = h // group  # grouped-query attention: `group` query heads share one kv head

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query positions
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = (
        Q
        + b * stride_qb
        + h * stride_qh
        + offs_m[:, None] * stride_qm
        + offs_d[None, :] * stride_qd
    )
    q = tl.load(q_ptrs, mask=offs_m[:, None] < Nq, other=0.0)  # (BLOCK_M, D), read once
    k_base = K + b * stride_kb + h_kv * stride_kh
    v_base = V + b * stride_vb + h_kv * stride_vh

    # This program's keys: its split's range, cut where the block's last query stops seeing.
    causal_shift = Nk - Nq  # bottom-right: query i sees keys j <= i + Nk - Nq
    lo = split * keys_per_split
    hi = tl.minimum(lo + keys_per_split, Nk)
    clear = hi  # keys below `clear` are seen by every query of the block
    if CAUSAL:
        hi = tl.minimum(hi, (pid_m + 1) * BLOCK_M + causal_shift)
        clear = tl.minimum(hi, pid_m * BLOCK_M + causal_shift + 1)
    mid = lo + tl.maximum(clear - lo, 0) // BLOCK_N * BLOCK_N  # whole blocks need no mask

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    acc, l_i, m_i = _attend_keys(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        offs_m, lo, mid, causal_shift, sm_scale,
        False, CAUSAL, HEAD_DIM, BLOCK_N, DOT_PRECISION,
    )  # fmt: skip
    acc, l_i, m_i = _attend_keys(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        offs_m, mid, hi, causal_shift, sm_scale,
        True, CAUSAL, HEAD_DIM, BLOCK_N, DOT_PRECISION,
    )  # fmt: skip

    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc / l_safe[:, None]  # a query that saw no key keeps acc == 0
    lse = tl.where(l_i == 0.0, float("-inf"), m_i + tl.math.log(l_safe))

    row_ok = offs_m < Nq
    o_ptrs = (
        Out
        + split * stride_os
        + b * stride_ob
        + h * stride_oh
        + offs_m[:, None] * stride_om
        + offs_d[None, :] * stride_od
    )
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None])
    lse_ptrs = Lse + (split * tl.num_programs(1) + pid_bh) * Nq + offs_m
    tl.store(lse_ptrs, lse, mask=row_ok)


def _attention_forward(q, k, v, causal: bool, sm_scale: float | None, num_splits: int):
    """Launch the kernel. Returns out (S, B, H, Nq, D) and lse (S, B, H, Nq) for S key splits.

    With one split `out` has q's dtype; with several it holds float32 partial results.
    """
    _check_inputs(q, k, v)
    B, H, Nq, D = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    if D not in _KERNEL_HEAD_DIMS:
        raise ValueError(f"the kernel supports head dims D in {_KERNEL_HEAD_DIMS}, got D={D}")
    if not q.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError(
            f"the Triton kernel needs CUDA tensors (or TRITON_INTERPRET=1), got {q.device}"
        )
    config = _tile_config(q)
    BLOCK_N = config["BLOCK_N"]
    keys_per_split = triton.cdiv(triton.cdiv(Nk, num_splits), BLOCK_N) * BLOCK_N  # whole blocks
    splits = triton.cdiv(Nk, keys_per_split)
    out_dtype = q.dtype if splits == 1 else torch.float32
    out = torch.empty((splits, B, H, Nq, D), dtype=out_dtype, device=q.device)
    lse = torch.empty((splits, B, H, Nq), dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(Nq, config["BLOCK_M"]), B * H, splits)
    _attention_fwd_kernel[grid](
        q, k, v, out, lse,
        H * Nq * D, Nq * D, D, 1,  # q, as if contiguous
        Hkv * Nk * D, Nk * D, D, 1,  # k
        Hkv * Nk * D, Nk * D, D, 1,  # v
        *out.stride(),
        H, Nq, Nk, H // Hkv, keys_per_split, _softmax_scale(sm_scale, D),
        CAUSAL=causal, HEAD_DIM=D,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",  # float32 stays float32
        **config,
    )  # fmt: skip
    return out, lse


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    sm_scale: float | None = None,
) -> torch.Tensor:
    """softmax(q k^T * sm_scale) v as one Triton kernel (forward only). Returns (B, H, Nq, D)."""
    out, _ = _attention_forward(q, k, v, causal, sm_scale, num_splits=1)
    return out[0]


def flash_attention_with_lse(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    sm_scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`flash_attention` plus lse = log(sum_j exp(s_j)) over each query's visible keys.

    Returns out (B, H, Nq, D) in q's dtype and lse (B, H, Nq) in float32, -inf where a query
    sees no key.
    """
    out, lse = _attention_forward(q, k, v, causal, sm_scale, num_splits=1)
    return out[0], lse[0]


def split_kv_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    sm_scale: float | None = None,
    num_splits: int = 8,
) -> torch.Tensor:
    """Attention of one new query per sequence over a long cache, keys split across programs.

    q (B, H, 1, D); k, v (B, Hkv, Nk, D). With one query there are only B*H query blocks, too
    few to fill a GPU; splitting the keys into `num_splits` ranges (whole key blocks, so fewer
    when Nk is short) gives B*H*num_splits programs. Their partial results meet in
    `combine_partials`. Returns (B, H, 1, D) in q's dtype.
    """
    _check_inputs(q, k, v)
    if q.shape[2] != 1:
        raise ValueError(
            f"split_kv_decode takes one query: q must be (B, H, 1, D), got {tuple(q.shape)}"
        )
    if num_splits < 1:
        raise ValueError(f"num_splits must be at least 1, got {num_splits}")
    outs, lses = _attention_forward(q, k, v, False, sm_scale, num_splits)
    out, _ = combine_partials(outs, lses)
    return out.to(q.dtype)
