"""The layers of the shared tiny Llama: RMSNorm, RoPE, grouped-query attention (packed rows, one
row at a time on the CPU), a SwiGLU feed-forward or a mixture of SwiGLU experts, and the block
that holds them. `grading/model/llama.py` puts them together into the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ModelConfig:
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 16
    vocab_size: int = 64
    max_seq_len: int = 256
    hidden_dim: int = 128  # of the SwiGLU feed-forward, or of each expert
    n_experts: int = 0  # 0: a dense SwiGLU feed-forward; else a mixture of this many experts
    top_k: int = 2  # experts per token, in a mixture
    rope_base: float = 10000.0
    norm_eps: float = 1e-6  # of every RMSNorm (checkpoints state their own, e.g. 1e-5)
    # Query/key weights this many times larger than a standard init: sharp, non-uniform attention.
    qk_gain: float = 3.0

    @property
    def dim(self) -> int:
        return self.n_heads * self.head_dim


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rope_tables(head_dim: int, max_len: int, base: float, dtype: torch.dtype):
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(max_len, dtype=torch.float64), inv_freq)  # (L, D/2)
    angles = torch.cat([angles, angles], dim=-1)  # (L, D), half-split layout as in Llama
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def causal_mask(Nq: int, Nk: int, device: torch.device | str | None = None) -> torch.Tensor:
    """bool (Nq, Nk), True where query i may see key j: j <= i + Nk - Nq (bottom-right aligned,
    so the newest query sees every key). The one causal mask of the repository."""
    rows = torch.arange(Nq, device=device)[:, None] + (Nk - Nq)  # (Nq, 1): each query's position
    return torch.arange(Nk, device=device)[None, :] <= rows


def causal_attention(q, k, v):
    """q (B, H, Tq, D); k, v (B, Hkv, Tk, D) with Tk >= Tq; the last query sees every key.

    Returns (output (B, H, Tq, D), probabilities (B, H, Tq, Tk)).
    """
    B, H, Tq, D = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    q = q.reshape(B * Hkv, H // Hkv * Tq, D)  # each key-value head's query heads, stacked
    out, probs = grouped_attention(q, k.reshape(B * Hkv, Tk, D), v.reshape(B * Hkv, Tk, D), Tq)
    return out.view(B, H, Tq, D), probs.view(B, H, Tq, Tk)


def grouped_attention(q, k, v, Tq: int):
    """Causal attention with the G query heads of each key-value head stacked into one matrix
    product with it (query head h reads key-value head h // G), so keys and values are never
    copied G times: q (M, G·Tq, D), head after head; k, v (M, Tk, D).

    Returns (output (M, G·Tq, D), probabilities (M, G·Tq, Tk)).
    """
    M, GTq, D = q.shape
    Tk = k.shape[1]
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(D)  # (M, G·Tq, Tk)
    if Tq > 1:  # a single query sees every key: nothing to mask
        hidden = ~causal_mask(Tq, Tk, q.device)  # (Tq, Tk), the same for every head
        scores = scores.view(M, GTq // Tq, Tq, Tk).masked_fill(hidden, float("-inf"))
        scores = scores.view(M, GTq, Tk)
    probs = scores.softmax(dim=-1)
    return torch.bmm(probs, v), probs


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.config, self.layer = config, layer
        c = config
        self.wq = nn.Linear(c.dim, c.n_heads * c.head_dim, bias=False)
        self.wk = nn.Linear(c.dim, c.n_kv_heads * c.head_dim, bias=False)
        self.wv = nn.Linear(c.dim, c.n_kv_heads * c.head_dim, bias=False)
        self.wo = nn.Linear(c.n_heads * c.head_dim, c.dim, bias=False)

    def forward_packed(self, x, cos, sin, attention):
        """x (N, dim) holds the rows' tokens back to back; `attention(layer, q, k, v)` takes
        q (N, H, hd) and k, v (N, Hkv, hd), RoPE'd, and returns (N, H, hd)."""
        c = self.config
        N = x.shape[0]
        q = self.wq(x).view(N, c.n_heads, c.head_dim)  # (N, H, hd)
        k = self.wk(x).view(N, c.n_kv_heads, c.head_dim)  # (N, Hkv, hd)
        v = self.wv(x).view(N, c.n_kv_heads, c.head_dim)
        cos, sin = cos[:, None], sin[:, None]  # (N, 1, hd): one position per token
        y = attention(self.layer, apply_rope(q, cos, sin), apply_rope(k, cos, sin), v)
        if not isinstance(y, torch.Tensor) or y.shape != q.shape:
            got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
            raise ValueError(f"attention: expected a result of shape {tuple(q.shape)}, got {got}")
        return self.wo(y.reshape(N, c.dim))

    def forward(self, x, cos, sin, cache=None):
        c = self.config
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, c.n_heads, c.head_dim).transpose(1, 2)  # (B, H, T, hd)
        k = self.wk(x).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)  # (B, Hkv, T, hd)
        v = self.wv(x).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is not None:
            k, v = cache.update(self.layer, k, v)  # (B, Hkv, L + T, hd)
        y, probs = causal_attention(q, k, v)
        return self.wo(y.transpose(1, 2).reshape(B, T, c.dim)), probs


class SwiGLU(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(config.dim, config.hidden_dim, bias=False)
        self.w3 = nn.Linear(config.dim, config.hidden_dim, bias=False)
        self.w2 = nn.Linear(config.hidden_dim, config.dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    """A mixture of SwiGLU experts. The router keeps each token's top_k experts: softmax of the
    router logits computed in float32, the k largest in descending order, renormalised to sum
    to 1 (the MoE kata's `route`, as its `moe_forward` does). This module's own forward is the
    naive one: every expert runs on every token, and the k chosen outputs are summed with their
    weights in float32 (float64 for float64)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_experts, self.top_k = config.n_experts, config.top_k
        self.gate = nn.Linear(config.dim, config.n_experts, bias=False)  # the router
        self.experts = nn.ModuleList(SwiGLU(config) for _ in range(config.n_experts))

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (M, dim) -> weights (M, top_k) float32, experts (M, top_k) int64."""
        logits = x.float() @ self.gate.weight.float().T  # (M, E): the router runs in float32
        probs = logits.softmax(dim=-1)
        top, experts = probs.topk(self.top_k, dim=-1, sorted=True)  # (M, k), descending
        return top / top.sum(dim=-1, keepdim=True), experts

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])  # (M, dim)
        weights, experts = self.route(x)
        outs = torch.stack([expert(x) for expert in self.experts])  # (E, M, dim): every expert
        tokens = torch.arange(x.shape[0], device=x.device)
        wide = torch.promote_types(x.dtype, torch.float32)
        y = torch.zeros(x.shape, dtype=wide, device=x.device)  # (M, dim)
        for r in range(self.top_k):
            y = y + weights[:, r, None].to(wide) * outs[experts[:, r], tokens].to(wide)
        return y.to(x.dtype).reshape(shape)


class Block(nn.Module):
    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.attn_norm = nn.Parameter(torch.ones(config.dim))
        self.attn = Attention(config, layer)
        self.mlp_norm = nn.Parameter(torch.ones(config.dim))
        self.mlp = MoE(config) if config.n_experts else SwiGLU(config)
        self.eps = config.norm_eps

    def forward_packed(self, x, cos, sin, attention, feed_forward=None):
        x = x + self.attn.forward_packed(rms_norm(x, self.attn_norm, self.eps), cos, sin, attention)
        h = rms_norm(x, self.mlp_norm, self.eps)
        if feed_forward is None:
            return x + self.mlp(h)
        y = feed_forward(self.attn.layer, h)
        if not isinstance(y, torch.Tensor) or y.shape != h.shape:
            got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
            raise ValueError(
                f"feed_forward: expected a result of shape {tuple(h.shape)}, got {got}"
            )
        return x + y

    def forward(self, x, cos, sin, cache=None):
        a, probs = self.attn(rms_norm(x, self.attn_norm, self.eps), cos, sin, cache)
        x = x + a
        return x + self.mlp(rms_norm(x, self.mlp_norm, self.eps)), probs
