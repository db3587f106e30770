"""FlashAttention: exact attention that never writes the N x N score matrix.

Plain attention computes S = Q K^T, then softmax(S), then softmax(S) V. Each step reads and writes
the whole (B, H, Nq, Nk) score matrix in slow GPU memory (HBM): for B=4, H=32, N=8192 in float16
that is 17 GB per pass, while Q, K, V and the output together are 1 GB. The arithmetic is cheap;
the traffic is what costs.

FlashAttention walks the keys in blocks. Per query it keeps three things on chip: the largest
score seen so far (m), the sum of exp(score - m) so far (l) and the output accumulated so far
(acc). When a new block raises the maximum, l and acc are rescaled by exp(m_old - m_new), so at
the end acc / l is exactly softmax(S) V. Scores live only one block at a time.

- Level 1, `tiled_attention`: that loop in plain PyTorch, one key block per iteration.
- Level 2, `flash_attention`: the same loop as one Triton kernel; a program owns a block of
  queries of one head, keeps it on chip and streams that head's keys and values through.
- Level 3, `flash_attention_with_lse`, `combine_partials`, `split_kv_decode`: the kernel also
  returns the log-sum-exp of each query's scores. Two results over disjoint key sets merge
  exactly through it, so a single decoding query can spread very long keys over many programs.

Conventions: q (B, H, Nq, D); k, v (B, Hkv, Nk, D) with H % Hkv == 0, query head h reads kv head
h // (H // Hkv). Causal masking is aligned bottom-right: query i sees keys j <= i + Nk - Nq, and
a query that sees no key returns zeros. sm_scale defaults to 1 / sqrt(D). Outputs have q's
dtype; every sum runs in float32.
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

from grading.devices import gpu_path

_KERNEL_HEAD_DIMS = (16, 32, 64, 128)
_LOG2E = tl.constexpr(1 / math.log(2))  # exp(x) == exp2(x * log2(e)); exp2 is the GPU's own


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """ValueError unless q (B, H, Nq, D) and k, v (B, Hkv, Nk, D) fit together."""
    for name, t, layout in (
        ("q", q, "B, H, Nq, D"),
        ("k", k, "B, Hkv, Nk, D"),
        ("v", v, "B, Hkv, Nk, D"),
    ):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a 4-D tensor ({layout}), got {shape}")
        if not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got {t.dtype}")
        if t.numel() == 0:
            raise ValueError(f"{name} must not be empty, got shape {tuple(t.shape)}")
    if k.shape != v.shape:
        raise ValueError(
            "k and v must have the same shape (B, Hkv, Nk, D), "
            f"got {tuple(k.shape)} and {tuple(v.shape)}"
        )
    B, H, _, D = q.shape
    if k.shape[0] != B:
        raise ValueError(f"q and k must have the same batch size B, got {B} and {k.shape[0]}")
    if k.shape[3] != D:
        raise ValueError(f"q and k must have the same head dim D, got {D} and {k.shape[3]}")
    if H % k.shape[1] != 0:
        raise ValueError(
            f"the number of query heads H={H} must be a multiple of the kv heads Hkv={k.shape[1]}"
        )
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not q.device == k.device == v.device:
        raise ValueError(
            f"q, k and v must be on one device, got {q.device}, {k.device}, {v.device}"
        )


def _softmax_scale(sm_scale: float | None, D: int) -> float:
    return 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)


# --------------------------------------------------------------------------------------------
# Level 1: the online softmax in PyTorch
# --------------------------------------------------------------------------------------------


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    sm_scale: float | None = None,
    block_size: int = 64,
) -> torch.Tensor:
    """softmax(q k^T * sm_scale) v, one block of `block_size` keys at a time.

    q (B, H, Nq, D); k, v (B, Hkv, Nk, D). Returns (B, H, Nq, D) in q's dtype.
    """
    _check_inputs(q, k, v)
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}")
    B, H, Nq, D = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    group = H // Hkv
    scale = _softmax_scale(sm_scale, D)

    # The `group` query heads that share kv head h sit together: (B, Hkv, group, Nq, D).
    qg = q.float().reshape(B, Hkv, group, Nq, D)
    last_key = torch.arange(Nq, device=q.device)[:, None] + (Nk - Nq)  # (Nq, 1): causal limit
    m = torch.full((B, Hkv, group, Nq, 1), float("-inf"), device=q.device)  # running max
    l = torch.zeros((B, Hkv, group, Nq, 1), device=q.device)  # running sum of exp(s - m)
    acc = torch.zeros((B, Hkv, group, Nq, D), device=q.device)  # running sum of exp(s - m) v

    for start in range(0, Nk, block_size):
        kb = k[:, :, None, start : start + block_size].float()  # (B, Hkv, 1, n, D)
        vb = v[:, :, None, start : start + block_size].float()
        s = (qg @ kb.transpose(-1, -2)) * scale  # (B, Hkv, group, Nq, n)
        if causal:
            keys = torch.arange(start, start + kb.shape[-2], device=q.device)  # (n,)
            s = s.masked_fill(keys > last_key, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        m_safe = m_new.masked_fill(m_new == float("-inf"), 0.0)  # rows that saw no key yet
        p = torch.exp(s - m_safe)  # (B, Hkv, group, Nq, n), each <= 1
        alpha = torch.exp(m - m_safe)  # how much the old max overestimated: rescale the past
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ vb
        m = m_new

    out = acc / torch.where(l == 0, 1.0, l)  # a query that saw no key keeps acc == 0
    return out.reshape(B, H, Nq, D).to(q.dtype)


# --------------------------------------------------------------------------------------------
# Level 2: one Triton kernel
# --------------------------------------------------------------------------------------------


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


def _tile_config(q: torch.Tensor) -> dict:
    """Tile sizes and launch settings for this device, dtype and head dim."""
    if not gpu_path(q):  # the GPU's tiles on a GPU, and in a rehearsal of the GPU tests
        # Triton's interpreter runs programs one at a time in NumPy: small tiles, so that the
        # short sequences of the CPU tests still span several query and key blocks.
        return dict(BLOCK_M=16, BLOCK_N=16, num_warps=1, num_stages=1)
    if q.dtype == torch.float32:  # 4-byte tiles: half the size to stay within shared memory
        return dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=2)
    if q.shape[-1] <= 64:
        return dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3)
    return dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3)


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
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
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


# --------------------------------------------------------------------------------------------
# Level 3: the log-sum-exp, and split-KV decoding
# --------------------------------------------------------------------------------------------


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


def combine_partials(outs: torch.Tensor, lses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge attention results over S disjoint key sets into the result over their union.

    outs (S, B, H, Nq, D) and lses (S, B, H, Nq), part s computed over key set s. The online
    softmax once more, over parts instead of keys: with m = max_s lses[s] and
    w_s = exp(lses[s] - m), out = sum_s w_s outs[s] / sum_s w_s and lse = m + log(sum_s w_s).
    Parts that saw no key (lse -inf) weigh nothing, whatever their out holds (NaN included).
    Returns out (B, H, Nq, D) and lse (B, H, Nq), both float32.
    """
    if outs.dim() != 5 or lses.shape != outs.shape[:4]:
        raise ValueError(
            f"outs must be (S, B, H, Nq, D) and lses (S, B, H, Nq), got {tuple(outs.shape)} "
            f"and {tuple(lses.shape)}"
        )
    if outs.shape[0] == 0:
        raise ValueError(f"outs must hold at least one part, got shape {tuple(outs.shape)}")
    lses = lses.float()
    # An empty part weighs exactly 0 whatever its out holds: 0 * NaN would be NaN.
    outs = outs.masked_fill(torch.isneginf(lses)[..., None], 0.0)
    m = lses.amax(dim=0)  # (B, H, Nq), -inf where every part is empty
    m_safe = m.masked_fill(m == float("-inf"), 0.0)
    weights = torch.exp(lses - m_safe)  # (S, B, H, Nq); the largest is exactly 1
    total = weights.sum(dim=0)  # (B, H, Nq)
    out = (weights[..., None] * outs.float()).sum(dim=0)  # (B, H, Nq, D)
    # Dividing by the weights' own sum (not by exp(lse)) keeps the rounding of lse out of out.
    out = out / torch.where(total == 0, 1.0, total)[..., None]
    return out, m_safe + torch.log(total)


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
