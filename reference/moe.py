"""Reference solution for the mixture-of-experts kata. Read it after trying the kata yourself.

A layer holds E experts (gated MLPs) but each token pays for only k of them. The arc of this
file: the router picks k experts per token; the capacity rule decides which assignments an
expert serves; the plan groups the kept assignments by expert; each expert runs once on its
group; the results are scattered back with their weights. Two auxiliary losses keep the router
healthy: the load-balancing loss (spread the tokens) and the z-loss (keep the logits small).

Short names: T tokens, d model width, h expert hidden width, E experts, k experts per token,
N kept assignments (N = T·k without a capacity limit), C an expert's capacity.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F


def _check_k(k: int, num_experts: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= num_experts:
        raise ValueError(f"k: expected an int in 1..E = 1..{num_experts}, got {k!r}")


def _check_experts(experts: torch.Tensor, num_experts: int) -> None:
    if experts.ndim != 2 or experts.dtype != torch.int64:
        raise ValueError(
            f"experts: expected int64 [T, k], got {experts.dtype} {tuple(experts.shape)}"
        )
    _check_k(experts.shape[1], num_experts)
    if experts.numel() and (int(experts.min()) < 0 or int(experts.max()) >= num_experts):
        raise ValueError(f"experts: expected indices in 0..{num_experts - 1}")


def _check_capacity(capacity: int | None) -> None:
    if capacity is not None and (
        isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0
    ):
        raise ValueError(f"capacity: expected None or an int >= 0, got {capacity!r}")


# ----------------------------------------------------------------------------------------------
# Level 1: the router


def route(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k most probable experts of each token, in descending order, with weights summing to 1.

    logits [T, E] -> weights [T, k] float32, experts [T, k] int64.
    """
    if logits.ndim != 2 or logits.shape[1] < 1 or not logits.dtype.is_floating_point:
        raise ValueError(
            f"logits: expected a float tensor [T, E] with E >= 1, got {logits.dtype} "
            f"{tuple(logits.shape)}"
        )
    _check_k(k, logits.shape[1])
    probs = torch.softmax(logits.float(), dim=-1)  # (T, E), float32 whatever the input dtype
    top, experts = torch.topk(probs, k, dim=-1, largest=True, sorted=True)  # (T, k) descending
    weights = top / top.sum(dim=-1, keepdim=True)  # renormalised over the k chosen
    return weights, experts


# ----------------------------------------------------------------------------------------------
# Level 2: capacity and the dispatch plan


def expert_capacity(num_tokens: int, k: int, num_experts: int, capacity_factor: float) -> int:
    """C = ceil(capacity_factor · T · k / E): the most assignments one expert serves."""
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 0:
        raise ValueError(f"num_tokens: expected an int >= 0, got {num_tokens!r}")
    if isinstance(num_experts, bool) or not isinstance(num_experts, int) or num_experts < 1:
        raise ValueError(f"num_experts: expected an int >= 1, got {num_experts!r}")
    _check_k(k, num_experts)
    if not 0 < capacity_factor < math.inf:  # also refuses NaN
        raise ValueError(f"capacity_factor: expected a finite number > 0, got {capacity_factor!r}")
    return math.ceil(capacity_factor * num_tokens * k / num_experts)


class DispatchPlan(NamedTuple):
    """The kept assignments grouped by expert: expert 0's group first, then expert 1's, ...

    Within a group, assignments are in priority order: by rank, then by token index.
    """

    token: torch.Tensor  # (N,) int64: the token of each kept assignment
    rank: torch.Tensor  # (N,) int64: its rank r, so the assignment is experts[token, rank]
    counts: torch.Tensor  # (E,) int64: the size of each expert's group


def plan_dispatch(
    experts: torch.Tensor, num_experts: int, *, capacity: int | None = None
) -> DispatchPlan:
    """Group the assignments experts [T, k] by expert, keeping at most `capacity` per expert.

    Priority is rank-major: every token's first choice comes before any token's second choice,
    and within a rank the earlier token wins.
    """
    _check_experts(experts, num_experts)
    _check_capacity(capacity)
    T, k = experts.shape
    flat = experts.T.reshape(-1)  # (k·T,) rank-major: priority order
    order = torch.sort(flat, stable=True).indices  # (k·T,) grouped by expert, priority kept
    routed = torch.bincount(flat, minlength=num_experts)  # (E,)
    starts = torch.cumsum(routed, dim=0) - routed  # (E,) where each group begins in `order`
    position = torch.arange(k * T, device=experts.device) - starts[flat[order]]  # (k·T,)
    if capacity is not None:  # capacity 0 keeps nothing
        order = order[position < capacity]  # (N,) the assignments the experts serve
    return DispatchPlan(
        token=order % T, rank=order // T, counts=torch.bincount(flat[order], minlength=num_experts)
    )


class ExpertLoad(NamedTuple):
    """How many assignments each expert was sent and how many it serves."""

    routed: torch.Tensor  # (E,) int64
    kept: torch.Tensor  # (E,) int64, min(routed, C)


def expert_load(
    experts: torch.Tensor, num_experts: int, *, capacity: int | None = None
) -> ExpertLoad:
    """The per-expert load report of experts [T, k] under an optional capacity."""
    _check_experts(experts, num_experts)
    _check_capacity(capacity)
    routed = torch.bincount(experts.reshape(-1), minlength=num_experts)  # (E,)
    kept = routed if capacity is None else routed.clamp(max=capacity)
    return ExpertLoad(routed=routed, kept=kept)


# ----------------------------------------------------------------------------------------------
# Level 3: dispatch, run each expert once, combine


def dispatch(x: torch.Tensor, plan: DispatchPlan) -> torch.Tensor:
    """Permute tokens into expert order: x [T, d] -> [N, d], row i is x[plan.token[i]]."""
    if x.ndim != 2:
        raise ValueError(f"x: expected [T, d], got {tuple(x.shape)}")
    return x.index_select(0, plan.token)


def combine(
    expert_out: torch.Tensor, weights: torch.Tensor, plan: DispatchPlan, num_tokens: int
) -> torch.Tensor:
    """Scatter-add weighted expert outputs back to their tokens: [N, d] -> [T, d].

    y[t] = Σ over kept assignments (t, r) of weights[t, r] · expert_out[row of (t, r)], summed
    in float32 (float64 for float64 expert_out) and returned in expert_out's dtype. A token with
    no kept assignment gets 0.
    """
    N = plan.token.shape[0]
    if expert_out.ndim != 2 or expert_out.shape[0] != N:
        raise ValueError(f"expert_out: expected [N={N}, d], got {tuple(expert_out.shape)}")
    if weights.ndim != 2 or weights.shape[0] != num_tokens:
        raise ValueError(f"weights: expected [T={num_tokens}, k], got {tuple(weights.shape)}")
    compute = torch.promote_types(expert_out.dtype, torch.float32)
    w = weights.to(compute)[plan.token, plan.rank]  # (N,)
    y = torch.zeros(num_tokens, expert_out.shape[1], dtype=compute, device=expert_out.device)
    y.index_add_(0, plan.token, expert_out.to(compute) * w[:, None])  # (T, d): add, not overwrite
    return y.to(expert_out.dtype)


def _check_expert(x, w1, w3, w2) -> None:
    if x.ndim != 2 or w1.ndim != 2 or w1.shape[0] != x.shape[1]:
        raise ValueError(
            f"x, w1: expected [n, d] and [d, h], got {tuple(x.shape)}, {tuple(w1.shape)}"
        )
    d, h = w1.shape
    if w3.shape != (d, h) or w2.shape != (h, d):
        raise ValueError(
            f"w3, w2: expected [d, h] = {(d, h)} and [h, d] = {(h, d)}, "
            f"got {tuple(w3.shape)}, {tuple(w2.shape)}"
        )
    _check_dtypes(x, w1=w1, w3=w3, w2=w2)


def _check_dtypes(x: torch.Tensor, **weights: torch.Tensor) -> None:
    """The experts run in x's dtype: their weights must have it too."""
    if not x.dtype.is_floating_point:
        raise ValueError(f"x: expected a float tensor, got {x.dtype}")
    for name, w in weights.items():
        if w.dtype != x.dtype:
            raise ValueError(f"{name}: expected x's dtype {x.dtype}, got {w.dtype}")


def expert_mlp(
    x: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor, w2: torch.Tensor
) -> torch.Tensor:
    """One expert, a gated MLP: (silu(x @ w1) * (x @ w3)) @ w2.

    x [n, d]; w1, w3 [d, h]; w2 [h, d] -> [n, d], in x's dtype.
    """
    _check_expert(x, w1, w3, w2)
    return (F.silu(x @ w1) * (x @ w3)) @ w2  # (n, h) -> (n, d)


def _check_layer(x, gate_w, w1, w3, w2) -> None:
    if x.ndim != 2:
        raise ValueError(f"x: expected [T, d], got {tuple(x.shape)}")
    d = x.shape[1]
    if gate_w.ndim != 2 or gate_w.shape[1] != d or gate_w.shape[0] < 1:
        raise ValueError(f"gate_w: expected [E, d={d}], got {tuple(gate_w.shape)}")
    E = gate_w.shape[0]
    if w1.ndim != 3 or w1.shape[:2] != (E, d):
        raise ValueError(f"w1: expected [E={E}, d={d}, h], got {tuple(w1.shape)}")
    h = w1.shape[2]
    if w3.shape != (E, d, h):
        raise ValueError(f"w3: expected [E={E}, d={d}, h={h}], got {tuple(w3.shape)}")
    if w2.shape != (E, h, d):
        raise ValueError(f"w2: expected [E={E}, h={h}, d={d}], got {tuple(w2.shape)}")
    if not gate_w.dtype.is_floating_point:
        raise ValueError(f"gate_w: expected a float tensor, got {gate_w.dtype}")
    _check_dtypes(x, w1=w1, w3=w3, w2=w2)


def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None) -> torch.Tensor:
    """The sparse MoE layer: y_t = Σ_r weights[t, r] · expert_{experts[t, r]}(x_t).

    x [T, d]; gate_w [E, d]; w1, w3 [E, d, h]; w2 [E, h, d] -> y [T, d] in x's dtype.
    The router runs in float32; each expert runs once, in x's dtype, on its group of tokens.
    """
    _check_layer(x, gate_w, w1, w3, w2)
    T, E = x.shape[0], gate_w.shape[0]
    logits = x.float() @ gate_w.float().T  # (T, E) router in float32
    weights, experts = route(logits, k)  # (T, k), (T, k)
    capacity = None if capacity_factor is None else expert_capacity(T, k, E, capacity_factor)
    plan = plan_dispatch(experts, E, capacity=capacity)
    grouped = dispatch(x, plan)  # (N, d)
    out = torch.empty_like(grouped)  # (N, d)
    start = 0
    for e, count in enumerate(plan.counts.tolist()):
        if count:  # an expert with no tokens costs nothing
            rows = slice(start, start + count)
            out[rows] = expert_mlp(grouped[rows], w1[e], w3[e], w2[e])
            start += count
    return combine(out, weights, plan, T)


# ----------------------------------------------------------------------------------------------
# Level 4: the router's auxiliary losses


def load_balancing_loss(logits: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    """E · Σ_e f_e · P_e: 1 at perfect balance, E when every token goes to one expert.

    f_e = (assignments to e) / (T · k), counted from experts [T, k] (no gradient);
    P_e = mean over tokens of softmax(logits [T, E])[:, e] in float32 (the gradient flows here).
    """
    if logits.ndim != 2 or logits.shape[0] < 1 or not logits.dtype.is_floating_point:
        raise ValueError(
            f"logits: expected a float tensor [T, E] with T >= 1, got {logits.dtype} "
            f"{tuple(logits.shape)}"
        )
    T, E = logits.shape
    if experts.ndim != 2 or experts.shape[0] != T:
        raise ValueError(f"experts: expected [T={T}, k], got {tuple(experts.shape)}")
    _check_experts(experts, E)
    k = experts.shape[1]
    f = torch.bincount(experts.reshape(-1), minlength=E).float() / (T * k)  # (E,)
    P = torch.softmax(logits.float(), dim=-1).mean(dim=0)  # (E,)
    return E * (f * P).sum()


def router_z_loss(logits: torch.Tensor) -> torch.Tensor:
    """mean over tokens of logsumexp(logits [T, E])², in float32: it keeps the logits small."""
    if logits.ndim != 2 or min(logits.shape) < 1 or not logits.dtype.is_floating_point:
        raise ValueError(
            f"logits: expected a float tensor [T, E] with T, E >= 1, got {logits.dtype} "
            f"{tuple(logits.shape)}"
        )
    return torch.logsumexp(logits.float(), dim=-1).square().mean()
