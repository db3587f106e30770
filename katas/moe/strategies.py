"""Hypothesis strategies for the MoE kata: layer sizes that break code, and the tensors they make.

A strategy draws a small spec (sizes, dtype, seed); `build()` turns it into tensors. On failure
Hypothesis prints the spec, which is everything needed to replay the example.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from hypothesis import strategies as st

from grading.devices import float_dtypes
from grading.strategies import lengths, randn, seeds

EXPERT_COUNTS = [1, 2, 3, 5, 8]
# Dyadic fractions: capacity_factor · T · k is exact in floating point, so ceil() is unambiguous.
CAPACITY_FACTORS = [0.25, 0.5, 0.75, 1.0, 1.25, 2.0]


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
        dtype=draw(st.sampled_from(dtypes or float_dtypes())),
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


@st.composite
def routing_specs(draw, *, max_tokens: int = 33) -> RoutingSpec:
    """Routings with no capacity limit, one from a capacity factor, or the extremes 1 and T·k."""
    E = draw(st.sampled_from(EXPERT_COUNTS + [16]))
    T, k = draw(lengths(max_tokens)), draw(st.integers(1, E))
    from_factors = [math.ceil(f * T * k / E) for f in CAPACITY_FACTORS]
    return RoutingSpec(
        T=T,
        E=E,
        k=k,
        seed=draw(seeds()),
        skew=draw(st.sampled_from([0.0, 0.5, 2.0])),
        capacity=draw(st.sampled_from([None, 1, T * k, *from_factors])),
    )
