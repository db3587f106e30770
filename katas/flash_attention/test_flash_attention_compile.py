"""The kernels compiled for real GPUs (A100: sm_80, H100/H200: sm_90), without running them.

Triton's CPU interpreter accepts kernels the GPU compiler rejects: a `tl.dot` whose inner size is
below 16 for 16-bit inputs, a block that is not a power of two, tiles of different shapes
combined. So each call below is made as on a GPU (tensors that say `is_cuda`), its kernel
launches are recorded instead of run, and each launch is compiled for both GPUs with its own
arguments: every head dim, float16 and bfloat16, causal or not, and the split-KV decode. Results
are cached, so an unchanged file costs a few seconds. See "On a real GPU" in the README, and
`python -m grading.gpu.kernel_report flash_attention` for what the compiled kernels use.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grading.gpu.aot import TARGETS, GpuCall, check_compiles, compile_calls

B, H, HKV, N, N_DECODE = 2, 4, 2, 1024, 8192
HEAD_DIMS = (16, 32, 64, 128)
DTYPES = ("float16", "bfloat16")


def _attention(function: str, D: int, dtype: str, causal: bool) -> GpuCall:
    shapes = ((B, H, N, D), (B, HKV, N, D), (B, HKV, N, D))
    return GpuCall(function, shapes, dtype, (("causal", causal),))


def _decode(D: int, dtype: str) -> GpuCall:
    shapes = ((B, H, 1, D), (B, HKV, N_DECODE, D), (B, HKV, N_DECODE, D))
    return GpuCall("split_kv_decode", shapes, dtype, (("num_splits", 8),))


# The calls whose kernels a GPU run compiles (grading.gpu.kernel_report reads this list too).
GPU_CALLS = [
    _attention(function, D, dtype, causal)
    for function in ("flash_attention", "flash_attention_with_lse")
    for D in HEAD_DIMS
    for dtype in DTYPES
    for causal in (False, True)
] + [_decode(D, dtype) for D in HEAD_DIMS for dtype in DTYPES]


@pytest.fixture(scope="module")
def compiled(impl):
    return compile_calls(Path(impl.__file__), GPU_CALLS)


@pytest.mark.parametrize("target", TARGETS)
def test_flash_attention_kernel_compiles_for_the_gpu(compiled, target):
    check_compiles(compiled.for_function("flash_attention"), target)


@pytest.mark.parametrize("target", TARGETS)
def test_lse_and_split_kv_kernels_compile_for_the_gpu(compiled, target):
    check_compiles(compiled.for_function("flash_attention_with_lse", "split_kv_decode"), target)
