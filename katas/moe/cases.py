"""What the MoE tests draw, and the float64 oracles they compare against.

Strategies draw a small spec (sizes, dtype, seed); `build()` turns it into tensors, so on failure
Hypothesis prints everything needed to replay the example. The oracles are slow, one token at a
time, and obviously right. The router's logits are the one thing not recomputed in float64: the
kata pins them to float32 (`x.float() @ gate_w.float().T`), and the oracle routes from the very
same float32 logits so that the oracle and the code under test pick the same experts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import pytest
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from grading.devices import float_dtypes
from grading.judge.errors import BadCall
from grading.judge.strategies import lengths, randn, seeds

EXPERT_COUNTS = [1, 2, 3, 5, 8]
# Dyadic fractions: capacity_factor · T · k is exact in floating point, so ceil() is unambiguous.
CAPACITY_FACTORS = [0.25, 0.5, 0.75, 1.0, 1.25, 2.0]
LAYER_DTYPES = [*float_dtypes(), torch.float64]


def widths(max_width: int = 16) -> st.SearchStrategy[int]:
    """Model and hidden widths: 1, primes, powers of two."""
    return st.one_of(st.sampled_from([1, 2, 3, 7, 8, 13, 16]), st.integers(1, max_width))


class Layer(NamedTuple):
    x: torch.Tensor  # (T, d)
    gate_w: torch.Tensor  # (E, d)
    w1: torch.Tensor  # (E, d, h)
    w3: torch.Tensor  # (E, d, h)
    w2: torch.Tensor  # (E, h, d)


@dataclass(frozen=True)
class LayerSpec:
    T: int
    d: int
    h: int
    E: int
    k: int
    dtype: torch.dtype
    seed: int
    skew: float = 0.0  # > 0 tilts the router towards low-numbered experts, so capacity binds

    def build(self, device: str | torch.device = "cpu") -> Layer:
        T, d, h, E, s = self.T, self.d, self.h, self.E, self.seed
        x = randn((T, d), seed=s, dtype=torch.float64)
        gate_w = randn((E, d), seed=s + 1, dtype=torch.float64)
        if self.skew:  # a constant first feature that every token shares, preferring expert 0
            x[:, 0] = 1.0
            gate_w[:, 0] = -self.skew * torch.arange(E, dtype=torch.float64)
        w1 = randn((E, d, h), seed=s + 2, scale=d**-0.5, dtype=torch.float64)
        w3 = randn((E, d, h), seed=s + 3, scale=d**-0.5, dtype=torch.float64)
        w2 = randn((E, h, d), seed=s + 4, scale=h**-0.5, dtype=torch.float64)
        return Layer(*(t.to(device=device, dtype=self.dtype) for t in (x, gate_w, w1, w3, w2)))


@st.composite
def layer_specs(
    draw,
    *,
    max_tokens: int = 33,
    experts: list[int] | None = None,
    dtypes: list[torch.dtype] | None = None,
    skews: list[float] | None = None,
) -> LayerSpec:
    E = draw(st.sampled_from(experts or EXPERT_COUNTS))
    return LayerSpec(
        T=draw(lengths(max_tokens)),
        d=draw(widths()),
        h=draw(widths()),
        E=E,
        k=draw(st.integers(1, E)),
        dtype=draw(st.sampled_from(dtypes or LAYER_DTYPES)),
        seed=draw(seeds()),
        skew=draw(st.sampled_from(skews or [0.0])),
    )


@dataclass(frozen=True)
class RoutingSpec:
    T: int
    E: int
    k: int
    seed: int
    skew: float = 0.0
    capacity: int | None = None

    def experts(self) -> torch.Tensor:
        """int64 [T, k]: k distinct experts per token, tilted towards expert 0 by `skew`."""
        logits = randn((self.T, self.E), seed=self.seed) - self.skew * torch.arange(self.E)
        return torch.topk(logits, self.k, dim=-1).indices


# float16 holds every integer only up to 2048 (2049 rounds to 2048): counts, cumulative sums or
# positions kept in a 16-bit float go wrong past it. These many tokens, skewed towards expert 0,
# put more than 2048 assignments on one expert, and capacities around 2048 then bind where
# float16 rounds (2049 to 2048, 2051 to 2052).
CROWDED_TOKENS = [2049, 2501]
CROWDED_CAPACITIES = [2048, 2049, 2051]


@st.composite
def routing_specs(draw, *, max_tokens: int = 33, crowded: bool | None = None) -> RoutingSpec:
    """Routings with no capacity limit, one from a capacity factor, or the extremes 0, 1, T·k;
    small ones, and crowded ones with more than 2048 assignments to one expert (only crowded
    ones with `crowded=True`)."""
    E = draw(st.sampled_from(EXPERT_COUNTS + [16, 64]))
    if crowded is None:
        crowded = draw(st.booleans(), label="more than 2048 assignments to one expert")
    T = draw(st.sampled_from(CROWDED_TOKENS) if crowded else lengths(max_tokens), label="T")
    k = draw(st.integers(1, min(E, 3) if crowded else E), label="k")
    from_factors = [math.ceil(f * T * k / E) for f in CAPACITY_FACTORS]
    capacities = [None, 0, 1, T * k, *from_factors] + (CROWDED_CAPACITIES if crowded else [])
    return RoutingSpec(
        T=T,
        E=E,
        k=k,
        seed=draw(seeds()),
        skew=draw(st.sampled_from([8.0] if crowded else [0.0, 0.5, 2.0]), label="skew"),
        capacity=draw(st.sampled_from(capacities), label="capacity"),
    )


# Skews the crowded layers draw: at 30 all tokens but a rare few choose expert 0 first (the
# router's other features move two experts' logits apart by about sqrt(2 (d - 1)) <= 5.5), so
# its group holds all T > 2048; at 8 most tokens do and the rest spread over the next experts.
CROWDED_SKEWS = [8.0, 30.0]


@st.composite
def crowded_layer_specs(draw) -> LayerSpec:
    """Layers of 2049 or 2501 tokens in float16 or bfloat16, skewed so that one expert is sent
    more than 2048 of them: past the integers float16 holds exactly (bfloat16 stops at 256)."""
    E = draw(st.sampled_from(EXPERT_COUNTS))
    return LayerSpec(
        T=draw(st.sampled_from(CROWDED_TOKENS), label="T"),
        d=draw(widths()),
        h=draw(widths()),
        E=E,
        k=draw(st.integers(1, min(E, 3)), label="k"),
        dtype=draw(st.sampled_from([torch.float16, torch.bfloat16]), label="dtype"),
        seed=draw(seeds()),
        skew=draw(st.sampled_from(CROWDED_SKEWS), label="skew"),
    )


# ----------------------------------------------------------------------------------------------
# Float64 oracles


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
    chosen = experts.tolist()
    served = [0] * num_experts
    kept = [[False] * k for _ in range(T)]
    for r in range(k):
        for t in range(T):
            e = chosen[t][r]
            if capacity is None or served[e] < capacity:
                kept[t][r] = True
                served[e] += 1
    return torch.tensor(kept, dtype=torch.bool).reshape(T, k)


def plan_oracle(
    experts: torch.Tensor, num_experts: int, capacity: int | None
) -> tuple[list[int], list[int], list[int]]:
    """(token, rank, counts) of the kept assignments, grouped by expert, in priority order."""
    T, k = experts.shape
    kept, chosen = kept_oracle(experts, num_experts, capacity).tolist(), experts.tolist()
    groups: list[list[tuple[int, int]]] = [[] for _ in range(num_experts)]
    for r in range(k):  # priority order: rank, then token
        for t in range(T):
            if kept[t][r]:
                groups[chosen[t][r]].append((t, r))
    tokens = [t for group in groups for t, _ in group]
    ranks = [r for group in groups for _, r in group]
    return tokens, ranks, [len(group) for group in groups]


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


def grouped_moe_oracle(x, gate_w, w1, w3, w2, k, capacity_factor=None, *, dtype=torch.float64):
    """moe_oracle for thousands of tokens: each expert runs once on all T tokens, in `dtype`,
    and every kept assignment adds its weight times its expert's row for its token: [T, d]."""
    T, E = x.shape[0], gate_w.shape[0]
    weights, experts = route_oracle(router_logits(x, gate_w), k)  # (T, k), (T, k)
    capacity = None if capacity_factor is None else capacity_oracle(T, k, E, capacity_factor)
    kept = kept_oracle(experts, E, capacity)  # (T, k)
    outputs = torch.stack([expert_oracle(x, w1[e], w3[e], w2[e], dtype=dtype) for e in range(E)])
    tokens = torch.arange(T)
    y = torch.zeros(T, x.shape[1], dtype=torch.float64)
    for r in range(k):  # outputs[experts[t, r], t]: token t's r-th expert on token t, (T, d)
        y += (weights[:, r] * kept[:, r])[:, None] * outputs[experts[:, r], tokens]
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


# ----------------------------------------------------------------------------------------------
# Bad input: each row is a BadCall and the argument its ValueError must name


def bad_input_table(rows: list[tuple[BadCall, str]]) -> list:
    """pytest parameters (bad, argument), each with the bad call's readable id."""
    return [pytest.param(bad, argument, id=str(bad)) for bad, argument in rows]
