"""Efficient attention: pay for the pairs that may attend to each other, not for all N² of them.

Dense attention scores every query against every key: N² work and an N x N score matrix. Many
models only ever let a query see part of the sequence, and then the cost can follow that pattern.

- Level 1, `sliding_window_attention`: each query sees its last `window` keys (Mistral, Gemma,
  Longformer's local part). Queries go in chunks of C; a chunk's keys are one band of
  C + window - 1 keys, so the scores are (Nq / C) x C x (C + window - 1) numbers, not Nq x Nk.
- Level 2, `block_sparse_attention`: a boolean matrix over blocks of `block_size` tokens says
  which query block may read which key block (BigBird, Longformer, Sparse Transformer). Only the
  allowed blocks are gathered and scored; the softmax of a query row runs across its blocks.
- Level 3, `linear_attention` and `linear_attention_step`: replace exp(q·k) with phi(q)·phi(k).
  Then sum_j phi(q)·phi(k_j) v_j = phi(q)ᵀ (sum_j phi(k_j) v_jᵀ): a D x Dv state that grows by
  one outer product per token, O(N·D²) work and memory independent of N when decoding.
- Level 4, `local_block_mask`, `global_block_mask`, `random_block_mask`: BigBird's patterns.
- Level 5, `RollingKVCache` and `sliding_window_decode_step`: decode with a window of keys kept
  in a ring buffer, whose memory stops growing at `window` tokens.

Conventions (shared with the FlashAttention kata): q (B, H, Nq, D); k (B, Hkv, Nk, D) and
v (B, Hkv, Nk, Dv) with H % Hkv == 0, query head h reads kv head h // (H // Hkv). Causal masks are
aligned bottom-right: query i sits at position p = i + Nk - Nq. A query that sees no key returns
zeros. sm_scale defaults to 1 / sqrt(D). Outputs have q's dtype; the arithmetic runs in float32
(float64 inputs stay float64).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# Queries per chunk in the sliding window. A chunk reads C + window - 1 keys for C queries, so
# C <= window keeps the work within twice the exact band; 128 is enough to keep matmuls busy.
_MAX_QUERY_CHUNK = 128
# Tokens per chunk in causal linear attention: C x C scores inside a chunk, a state between chunks.
_LINEAR_CHUNK = 64


def _check_attention_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """ValueError unless q (B, H, Nq, D), k (B, Hkv, Nk, D) and v (B, Hkv, Nk, Dv) fit together."""
    layouts = {"q": "B, H, Nq, D", "k": "B, Hkv, Nk, D", "v": "B, Hkv, Nk, Dv"}
    for (name, layout), t in zip(layouts.items(), (q, k, v), strict=True):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a 4-D tensor [{layout}], got {shape}")
        if not t.is_floating_point() or t.numel() == 0:
            raise ValueError(
                f"{name} must be a non-empty float tensor, got {t.dtype} {tuple(t.shape)}"
            )
    B, H, _, D = q.shape
    if k.shape[0] != B or k.shape[3] != D:
        raise ValueError(f"k must be [B={B}, Hkv, Nk, D={D}] to match q, got {tuple(k.shape)}")
    if H % k.shape[1]:
        raise ValueError(f"k: its {k.shape[1]} heads (Hkv) must divide the H={H} query heads")
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(
            f"v must be [{', '.join(map(str, k.shape[:3]))}, Dv] like k, got {tuple(v.shape)}"
        )
    _check_same_dtype_and_device(q=q, k=k, v=v)


def _check_same_dtype_and_device(**tensors: torch.Tensor) -> None:
    """ValueError unless the tensors share one dtype and one device."""
    if len({(t.dtype, t.device) for t in tensors.values()}) > 1:
        got = ", ".join(f"{name} {t.dtype}/{t.device}" for name, t in tensors.items())
        raise ValueError(f"{', '.join(tensors)} must share a dtype and a device, got {got}")


def _check_int(name: str, value: int, low: int, high: float = math.inf) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        wanted = f">= {low}" if high == math.inf else f"in {low}..{high}"
        raise ValueError(f"{name} must be an int {wanted}, got {value!r}")


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)  # float32, or float64 for float64 inputs


def _softmax_scale(sm_scale: float | None, D: int) -> float:
    return 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)


def _expand_kv(x: torch.Tensor, H: int) -> torch.Tensor:
    """(B, Hkv, ...) -> (B, H, ...): query head h reads kv head h // (H // Hkv)."""
    return x.repeat_interleave(H // x.shape[1], dim=1)


def _softmax_or_zeros(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim among the allowed entries; a row with none allowed gives zeros."""
    scores = scores.masked_fill(~allowed, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0)  # empty row: -inf -> 0
    p = torch.exp(scores - row_max)  # masked entries: exp(-inf) = 0
    # The row's maximum contributes exp(0) = 1, so a row that sees any key sums to >= 1.
    return p / p.sum(dim=-1, keepdim=True).clamp_min(1.0)


# --------------------------------------------------------------------------------------------
# Level 1: sliding window
# --------------------------------------------------------------------------------------------


def _key_span(x: torch.Tensor, start: int, length: int) -> torch.Tensor:
    """Positions start .. start + length - 1 of x (B, Hkv, Nk, d) along dim 2, zeros outside."""
    Nk = x.shape[2]
    lo, hi = max(start, 0), min(start + length, Nk)
    return F.pad(x[:, :, lo:hi], (0, 0, lo - start, start + length - hi))


def sliding_window_attention(q, k, v, window, sm_scale=None):
    """Causal attention where query i (position p = i + Nk - Nq) sees keys p - window < j <= p.

    q (B, H, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) -> (B, H, Nq, Dv).
    Work and memory O(Nq · window · D): never an Nq x Nk tensor.
    """
    _check_attention_inputs(q, k, v)
    _check_int("window", window, 1)
    B, H, Nq, D = q.shape
    Nk = k.shape[2]
    acc = _compute_dtype(q.dtype)
    W = min(window, Nk)  # a window longer than the keys is plain causal attention
    C = min(W, _MAX_QUERY_CHUNK)  # queries per chunk
    n_chunks = -(-Nq // C)
    band = C + W - 1  # keys one chunk may see

    # Chunk c holds queries c*C .. c*C + C - 1; its band starts at the position of the first
    # query minus W - 1. The bands of consecutive chunks overlap by W - 1 keys.
    start = Nk - Nq - W + 1
    length = n_chunks * C + W - 1
    k_bands = _key_span(k.to(acc), start, length).unfold(2, band, C).transpose(-1, -2)
    v_bands = _key_span(v.to(acc), start, length).unfold(2, band, C).transpose(-1, -2)
    k_bands = _expand_kv(k_bands, H)  # (B, H, n_chunks, band, D)
    v_bands = _expand_kv(v_bands, H)  # (B, H, n_chunks, band, Dv)
    q_chunks = F.pad(q.to(acc), (0, 0, 0, n_chunks * C - Nq)).unflatten(2, (n_chunks, C))

    # Query a of a chunk and key b of its band are (W - 1) + a - b positions apart, the same in
    # every chunk: the window is a <= b <= a + W - 1. Keys outside 0 .. Nk - 1 are padding.
    a = torch.arange(C, device=q.device)[:, None]
    b = torch.arange(band, device=q.device)[None, :]
    in_window = (a <= b) & (b <= a + W - 1)  # (C, band)
    key_pos = torch.arange(start, start + length, device=q.device)
    real_key = ((key_pos >= 0) & (key_pos < Nk)).unfold(0, band, C)  # (n_chunks, band)
    allowed = in_window & real_key[:, None, :]  # (n_chunks, C, band)

    scale = _softmax_scale(sm_scale, D)
    scores = (q_chunks @ k_bands.transpose(-1, -2)) * scale  # (B, H, n_chunks, C, band)
    out = _softmax_or_zeros(scores, allowed) @ v_bands  # (B, H, n_chunks, C, Dv)
    return out.flatten(2, 3)[:, :, :Nq].to(q.dtype)


# --------------------------------------------------------------------------------------------
# Level 2: block-sparse
# --------------------------------------------------------------------------------------------


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
        allowed = allowed & (key_pos <= query_pos)
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


# --------------------------------------------------------------------------------------------
# Level 3: linear attention
# --------------------------------------------------------------------------------------------


def _phi(x: torch.Tensor) -> torch.Tensor:
    """The feature map elu(x) + 1: positive everywhere, so every denominator is > 0."""
    return F.elu(x) + 1.0


def _exclusive_cumsum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Sum of the entries strictly before each index along `dim`."""
    before = x.cumsum(dim).narrow(dim, 0, x.shape[dim] - 1)
    return torch.cat([torch.zeros_like(x.narrow(dim, 0, 1)), before], dim)


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
    denom = denom + (fq @ z[..., None]).squeeze(-1)
    return (numer.flatten(2, 3) / denom.flatten(2, 3)[..., None])[:, :, :n]  # (B, H, n, Dv)


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
    return F.pad(out, (0, 0, Nq - n, 0)).to(q.dtype)  # (B, H, Nq, Dv)


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
        if t.numel() == 0:
            raise ValueError(f"{name} must be a non-empty [B, heads, D], got {tuple(t.shape)}")
    B, H, D = q_t.shape
    Hkv, Dv = k_t.shape[1], v_t.shape[2]
    if k_t.shape != (B, Hkv, D) or H % Hkv or v_t.shape[:2] != (B, Hkv):
        raise ValueError(
            f"k_t must be [B={B}, Hkv, D={D}] with Hkv dividing H={H}, and v_t [B, Hkv, Dv]; "
            f"got k_t {tuple(k_t.shape)}, v_t {tuple(v_t.shape)}"
        )
    _check_same_dtype_and_device(q_t=q_t, k_t=k_t, v_t=v_t)
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


# --------------------------------------------------------------------------------------------
# Level 4: BigBird-style block patterns
# --------------------------------------------------------------------------------------------


def local_block_mask(n_blocks, radius, *, causal=False):
    """bool (n_blocks, n_blocks): block r sees c iff |r - c| <= radius (and c <= r if causal)."""
    _check_int("n_blocks", n_blocks, 1)
    _check_int("radius", radius, 0)
    r = torch.arange(n_blocks)
    offset = r[None, :] - r[:, None]  # c - r
    mask = offset.abs() <= radius
    return mask & (offset <= 0) if causal else mask


def global_block_mask(n_blocks, n_global):
    """bool (n_blocks, n_blocks): the first n_global blocks see every block and are seen by all."""
    _check_int("n_blocks", n_blocks, 1)
    _check_int("n_global", n_global, 0, n_blocks)
    mask = torch.zeros(n_blocks, n_blocks, dtype=torch.bool)
    mask[:n_global, :] = True  # global queries read everything
    mask[:, :n_global] = True  # and every query reads the global keys
    return mask


def random_block_mask(n_blocks, n_random, *, seed):
    """bool (n_blocks, n_blocks): each block row sees n_random distinct key blocks, drawn
    uniformly from a torch.Generator seeded with `seed` (the same seed gives the same mask)."""
    _check_int("n_blocks", n_blocks, 1)
    _check_int("n_random", n_random, 0, n_blocks)
    gen = torch.Generator().manual_seed(seed)
    picks = torch.rand(n_blocks, n_blocks, generator=gen).argsort(dim=1)[:, :n_random]
    return torch.zeros(n_blocks, n_blocks, dtype=torch.bool).scatter(1, picks, True)


# --------------------------------------------------------------------------------------------
# Level 5: decoding with a rolling window of keys
# --------------------------------------------------------------------------------------------


class RollingKVCache:
    """The last `window` keys and values of one attention layer, in a ring buffer.

    The token at absolute position p lives in slot p % window, so memory is 2 x (B, Hkv, window,
    head_dim) however long decoding runs. Keys are stored after RoPE at their absolute position;
    attention does not care in which order the slots hold them.
    """

    def __init__(self, window, batch, n_kv_heads, head_dim, *, dtype=torch.float32, device=None):
        sizes = {"window": window, "batch": batch, "n_kv_heads": n_kv_heads, "head_dim": head_dim}
        for name, value in sizes.items():
            _check_int(name, value, 1)
        self.window = window
        self.k = torch.zeros(batch, n_kv_heads, window, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)  # (B, Hkv, window, head_dim)
        self._seq_len = 0

    @property
    def seq_len(self) -> int:
        """Tokens appended so far: the absolute position of the next token."""
        return self._seq_len

    def append(self, k_t, v_t):
        """Store one token's k_t, v_t (B, Hkv, head_dim), evicting the token `window` back.

        Returns the keys and values in the window, (B, Hkv, min(seq_len, window), head_dim) each,
        in slot order (views of the buffer).
        """
        expected = self.k.shape[:2] + self.k.shape[3:]
        for name, t in (("k_t", k_t), ("v_t", v_t)):
            if t.shape != expected:
                raise ValueError(
                    f"{name} must be {list(expected)} [B, Hkv, head_dim], got {list(t.shape)}"
                )
        slot = self._seq_len % self.window
        self.k[:, :, slot] = k_t
        self.v[:, :, slot] = v_t
        self._seq_len += 1
        # Before the buffer fills, only slots 0 .. n - 1 hold keys.
        n = min(self._seq_len, self.window)
        return self.k[:, :, :n], self.v[:, :, :n]


def _rope(x: torch.Tensor, position: int, base: float) -> torch.Tensor:
    """Rotate x (..., D) to absolute `position`, in the half-split layout of grading.model."""
    D = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, D, 2, dtype=torch.float64, device=x.device) / D)
    angles = (position * inv_freq).repeat(2)  # (D,)
    x1, x2 = x.chunk(2, dim=-1)
    return x * angles.cos().to(x.dtype) + torch.cat([-x2, x1], dim=-1) * angles.sin().to(x.dtype)


def sliding_window_decode_step(q_t, k_t, v_t, cache, *, rope_base=10000.0, sm_scale=None):
    """Decode one token with sliding-window attention over `cache`.

    q_t (B, H, D), k_t and v_t (B, Hkv, D), before RoPE. The token's absolute position is
    cache.seq_len: q_t and k_t are rotated there, k_t and v_t are appended, and q_t attends over
    the window. Returns (B, H, D) in q_t's dtype, equal to row p of sliding_window_attention.
    """
    for name, t in (("q_t", q_t), ("k_t", k_t), ("v_t", v_t)):
        if t.dim() != 3 or t.numel() == 0:
            raise ValueError(f"{name} must be a non-empty [B, heads, D], got {tuple(t.shape)}")
    shapes_fit = q_t.shape[0] == k_t.shape[0] and q_t.shape[1] % k_t.shape[1] == 0
    if not shapes_fit or q_t.shape[-1] != k_t.shape[-1] or q_t.shape[-1] % 2:
        raise ValueError(
            f"q_t must be [B, H, D] and k_t [B, Hkv, D] with Hkv dividing H and D even (RoPE "
            f"rotates pairs), got {tuple(q_t.shape)} and {tuple(k_t.shape)}"
        )
    _check_same_dtype_and_device(q_t=q_t, k_t=k_t, v_t=v_t)
    H, D = q_t.shape[1], q_t.shape[2]
    acc = _compute_dtype(q_t.dtype)
    position = cache.seq_len  # absolute: it keeps counting after the buffer wraps
    q_rot = _rope(q_t.to(acc), position, rope_base)  # (B, H, D)
    keys, values = cache.append(_rope(k_t.to(acc), position, rope_base), v_t)
    keys = _expand_kv(keys.to(acc), H)  # (B, H, n, D), n = min(seq_len, window)
    values = _expand_kv(values.to(acc), H)
    scores = (keys @ q_rot[..., None]).squeeze(-1) * _softmax_scale(sm_scale, D)  # (B, H, n)
    o_t = (scores.softmax(dim=-1)[..., None, :] @ values).squeeze(-2)  # (B, H, D)
    return o_t.to(q_t.dtype)
