"""Float64 oracles for the MoE kata: slow, one token at a time, obviously right.

The router's logits are the one thing not recomputed in float64: the kata pins them to float32
(`x.float() @ gate_w.float().T`), and the oracle routes from the very same float32 logits so
that the oracle and the code under test pick the same experts.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def router_logits(x: torch.Tensor, gate_w: torch.Tensor) -> torch.Tensor:
    """The pinned router: logits [T, E] = x [T, d] @ gate_w [E, d]ᵀ, in float32."""
    return x.float() @ gate_w.float().T


def route_oracle(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 weights [T, k] (top-k probabilities renormalised) and experts [T, k], descending."""
    probs = torch.softmax(logits.double().cpu(), dim=-1)  # (T, E)
    top, experts = torch.topk(probs, k, dim=-1)
    return top / top.sum(dim=-1, keepdim=True), experts


def capacity_oracle(num_tokens: int, k: int, num_experts: int, capacity_factor: float) -> int:
    return math.ceil(capacity_factor * num_tokens * k / num_experts)


def kept_oracle(experts: torch.Tensor, num_experts: int, capacity: int | None) -> torch.Tensor:
    """bool [T, k]: which assignments an expert serves, first choices of all tokens first."""
    T, k = experts.shape
    served = [0] * num_experts
    kept = torch.zeros(T, k, dtype=torch.bool)
    for r in range(k):
        for t in range(T):
            e = int(experts[t, r])
            if capacity is None or served[e] < capacity:
                kept[t, r] = True
                served[e] += 1
    return kept


def plan_oracle(
    experts: torch.Tensor, num_experts: int, capacity: int | None
) -> tuple[list[int], list[int], list[int]]:
    """(token, rank, counts) of the kept assignments, grouped by expert, in priority order."""
    T, k = experts.shape
    kept = kept_oracle(experts, num_experts, capacity)
    tokens, ranks, counts = [], [], []
    for e in range(num_experts):
        group = [(t, r) for r in range(k) for t in range(T) if kept[t, r] and experts[t, r] == e]
        tokens += [t for t, _ in group]
        ranks += [r for _, r in group]
        counts.append(len(group))
    return tokens, ranks, counts


def expert_oracle(x_t, w1_e, w3_e, w2_e, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """One expert, (silu(x @ w1) * (x @ w3)) @ w2, computed in `dtype`, returned in float64."""
    x_t, w1_e, w3_e, w2_e = (a.detach().cpu().to(dtype) for a in (x_t, w1_e, w3_e, w2_e))
    return ((F.silu(x_t @ w1_e) * (x_t @ w3_e)) @ w2_e).double()


def moe_oracle(x, gate_w, w1, w3, w2, k, capacity_factor=None, *, dtype=torch.float64):
    """The MoE layer, token by token, summed in float64: [T, d].

    `dtype` is the precision the experts run in: float64 gives the oracle; the input's own dtype
    gives a baseline that rounds the way a correct low-precision layer does.
    """
    T, E = x.shape[0], gate_w.shape[0]
    weights, experts = route_oracle(router_logits(x, gate_w), k)
    capacity = None if capacity_factor is None else capacity_oracle(T, k, E, capacity_factor)
    kept = kept_oracle(experts, E, capacity)
    y = torch.zeros(T, x.shape[1], dtype=torch.float64)
    for t in range(T):
        for r in range(k):
            if kept[t, r]:
                e = int(experts[t, r])
                y[t] += weights[t, r] * expert_oracle(x[t], w1[e], w3[e], w2[e], dtype=dtype)
    return y


def dense_mixture_oracle(x, gate_w, w1, w3, w2, *, dtype=torch.float64) -> torch.Tensor:
    """Every expert on every token, weighted by the full softmax: Σ_e p_e · expert_e(x) [T, d]."""
    probs = torch.softmax(router_logits(x, gate_w).double().cpu(), dim=-1)  # (T, E)
    y = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float64)
    for e in range(gate_w.shape[0]):
        y += probs[:, e, None] * expert_oracle(x, w1[e], w3[e], w2[e], dtype=dtype)
    return y


def load_balancing_oracle(logits: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    """E · Σ_e f_e · P_e in float64, with P from the float64 softmax of the logits."""
    T, E = logits.shape
    k = experts.shape[1]
    probs = torch.softmax(logits.double().cpu(), dim=-1)  # (T, E)
    loss = torch.zeros((), dtype=torch.float64)
    for e in range(E):
        f_e = int((experts == e).sum()) / (T * k)
        loss = loss + f_e * probs[:, e].mean()
    return E * loss


def z_loss_oracle(logits: torch.Tensor) -> torch.Tensor:
    """mean_t (log Σ_e exp logits[t, e])² in float64."""
    return torch.logsumexp(logits.double().cpu(), dim=-1).square().mean()
