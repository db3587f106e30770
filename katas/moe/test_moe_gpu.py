"""GPU: the grouped MoE layer against every expert on every token (skipped without CUDA;
`pytest katas/moe -m gpu --rehearse` runs it on the CPU, small, without judging speed)."""

from __future__ import annotations

import pytest
import torch

from grading.judge.tolerance import assert_error_within
from katas.moe.cases import moe_oracle


def _dense_moe(x, gate_w, w1, w3, w2, k):
    """Every expert on every token, weights zero off the chosen k: right, and E / k x the work."""
    probs = torch.softmax(x.float() @ gate_w.float().T, dim=-1)  # (T, E)
    top, experts = torch.topk(probs, k, dim=-1)  # (T, k)
    gates = torch.zeros_like(probs).scatter(1, experts, top / top.sum(-1, keepdim=True))  # (T, E)
    hidden = torch.nn.functional.silu(x @ w1) * (x @ w3)  # (T, d) x (E, d, h) -> (E, T, h)
    out = hidden @ w2  # (E, T, d)
    return torch.einsum("etd,te->td", out.float(), gates).to(x.dtype)  # (T, d)


def _gpu_layer(gpu, T, d, h, E, dtype):
    gen = gpu.generator(0)

    def normal(*shape, scale=1.0):
        return (torch.randn(shape, generator=gen, device=gpu.device) * scale).to(dtype)

    x, gate_w = normal(T, d), normal(E, d)
    w1, w3 = normal(E, d, h, scale=d**-0.5), normal(E, d, h, scale=d**-0.5)
    return x, gate_w, w1, w3, normal(E, h, d, scale=h**-0.5)


@pytest.mark.gpu
@pytest.mark.headline("64")
@pytest.mark.parametrize("E", [8, 64])
def test_grouped_dispatch_beats_dense_on_gpu(impl, figures, gpu, E):
    T, d, h, k = gpu.count(16384, 256), gpu.size(1024, 32), gpu.size(1024, 32), 2
    dtype = gpu.dtype(torch.bfloat16)
    layer = _gpu_layer(gpu, T, d, h, E, dtype)
    y = impl.moe_forward(*layer, k)
    dense = _dense_moe(*layer, k)
    n = 16  # check a few tokens against the float64 oracle before timing anything
    assert_error_within(
        y[:n],
        moe_oracle(layer[0][:n], *layer[1:], k),
        dense[:n],
        name="moe_forward on the GPU",
        hint="the grouped layer should be as accurate as the dense computation in the same dtype",
    )
    grouped_ms = gpu.bench(lambda: impl.moe_forward(*layer, k))
    dense_ms = gpu.bench(lambda: _dense_moe(*layer, k))
    speedup = dense_ms / grouped_ms
    figures.record(
        "speed-up of grouped dispatch over dense", speedup, "x", E=E, k=k, T=T, d=d, h=h,
        dtype=str(dtype).removeprefix("torch."), flop_ratio=E / k,
    )  # fmt: skip
    if E == 64:
        figures.expect(
            speedup > 1.0,
            f"with E = {E}, k = {k} the grouped layer does {E // k}x less expert work than the "
            f"dense one yet is not faster (speed-up {speedup:.2f}x): look for a Python loop over "
            "tokens, a host sync per expert, or work done on dropped or unrouted tokens",
        )
