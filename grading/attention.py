"""The attention test kit every attention kata shares: one case, one causal mask, one benchmark.

Conventions (the same as `grading.oracles`): q (B, H, Nq, D); k (B, Hkv, Nk, D); v (B, Hkv, Nk,
Dv); H % Hkv == 0 and query head h reads kv head h // (H // Hkv). Causal masks align
bottom-right: query i sits at position i + Nk - Nq and sees keys j <= i + Nk - Nq, so the newest
query sees every key (as in decoding with a cache).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from grading.devices import default_device
from grading.model import causal_mask  # noqa: F401 - part of the kit: one causal mask
from grading.strategies import randn


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


def bench(fn: Callable[[], object], *, warmup: int = 25, rep: int = 100) -> float:
    """Median milliseconds per call of `fn`, after a warm-up call.

    On a GPU, `triton.testing.do_bench` (`warmup` and `rep` in milliseconds), which flushes the L2
    cache between calls and takes the median, so speed-ups recorded by different katas are
    comparable. Without one (a rehearsal of the GPU tests on the CPU), the same call timed with
    the CPU's clock: one call (Triton's interpreter compiles nothing). Those times rehearse the
    code path only; they are never judged.
    """
    if not torch.cuda.is_available():
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3
    import triton.testing  # only on a GPU machine

    fn()  # compilation, autotuning, allocator warm-up
    torch.cuda.synchronize()
    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
