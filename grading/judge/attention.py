"""The attention test kit every attention kata shares: one case, one causal mask, one benchmark.

Conventions (the same as `grading.judge.oracles`): q (B, H, Nq, D); k (B, Hkv, Nk, D);
v (B, Hkv, Nk, Dv); H % Hkv == 0 and query head h reads kv head h // (H // Hkv). Causal masks align
bottom-right: query i sits at position i + Nk - Nq and sees keys j <= i + Nk - Nq, so the newest
query sees every key (as in decoding with a cache).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from grading.devices import default_device
from grading.judge.strategies import randn
from grading.model import causal_mask  # noqa: F401 - part of the kit: one causal mask


@dataclass(frozen=True, kw_only=True)
class AttentionCase:
    """Everything needed to rebuild one attention problem; Hypothesis prints it on failure."""

    B: int = 1
    H: int = 1
    Hkv: int = 1
    Nq: int
    Nk: int
    D: int
    Dv: int | None = None  # None: the same as D
    causal: bool = False
    sm_scale: float | None = None
    dtype: torch.dtype = torch.float32
    scale: float = 1.0  # standard deviation of q and k
    seed: int = 0

    @property
    def value_dim(self) -> int:
        return self.D if self.Dv is None else self.Dv

    def tensors(self, device: torch.device | str | None = None):
        """q (B, H, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv), drawn on the CPU from seed."""
        device = device or default_device()
        common = dict(dtype=self.dtype, device=device)
        q = randn((self.B, self.H, self.Nq, self.D), seed=self.seed, scale=self.scale, **common)
        kv = (self.B, self.Hkv, self.Nk)
        k = randn((*kv, self.D), seed=self.seed + 1, scale=self.scale, **common)
        v = randn((*kv, self.value_dim), seed=self.seed + 2, **common)
        return q, k, v

    def reseeded(self, seed: int) -> AttentionCase:
        """The same shapes with new values: a result remembered from an earlier call won't fit."""
        return replace(self, seed=seed)

    @property
    def options(self) -> dict:
        return dict(causal=self.causal, sm_scale=self.sm_scale)


# Half the exponent of how far below zero every score sits (see scores_below_any_mask): 2**18
# is past float16's largest number (65504, so its finfo.min as a mask loses) and far past -1e4;
# 2**100 and 2**118 are past -1e30, the running max's start in many kernels.
def below_mask_powers(dtype: torch.dtype) -> list[int]:
    """The powers of scores_below_any_mask that inputs of `dtype` hold."""
    return [10] if dtype == torch.float16 else [10, 51, 60]


def scores_below_any_mask(case: AttentionCase, power: int):
    """q, k, v of `case` (D = 16, default sm_scale) whose every score is exactly
    -2**(2 * power - 2) + j / 4 for a small integer j: below any finite mask constant.

    q = (2**power, ±1, 0, ...) and k = (-2**power, j, 0, ...), so q·k is exact in float32. At
    power 10 the spread of j / 4 survives and the softmax is not flat; at 51 and 60 it is lost
    (in float64 as well), and every visible key weighs the same. A masked key given a finite
    score instead of -inf, or a running max started at a finite value, then wins.
    """
    assert case.D == 16 and case.sm_scale is None, "scores are exact only for sm_scale = 1/4"
    gen = torch.Generator().manual_seed(case.seed)
    q = torch.zeros(case.B, case.H, case.Nq, case.D, dtype=torch.float64)
    k = torch.zeros(case.B, case.Hkv, case.Nk, case.D, dtype=torch.float64)
    q[..., 0], k[..., 0] = 2.0**power, -(2.0**power)
    q[..., 1] = torch.randint(0, 2, q.shape[:3], generator=gen) * 2.0 - 1.0
    k[..., 1] = torch.randint(-4, 5, k.shape[:3], generator=gen).double()
    v = case.tensors("cpu")[2]
    return tuple(t.to(device=default_device(), dtype=case.dtype) for t in (q, k, v))
