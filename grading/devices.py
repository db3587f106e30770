"""Where the katas run: CUDA when there is a GPU, otherwise the CPU with Triton's interpreter;
and how a call is timed there (`bench`).

The bottom of `grading/`: it imports nothing from the repository. Solutions may import it
(`gpu_path`: whether code working on a tensor takes its GPU branch, which a rehearsal of the GPU
tests, `pytest katas -m gpu --rehearse`, runs on the CPU).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

import torch

# Set (to "1") for the whole process by `--rehearse`, like TRITON_INTERPRET: code that has a GPU
# path takes it in a rehearsal too (`gpu_path`), so that path has run before any GPU sees it.
REHEARSAL = "KATAS_REHEARSAL"


def has_cuda() -> bool:
    return torch.cuda.is_available()


def default_device() -> torch.device:
    return torch.device("cuda" if has_cuda() else "cpu")


def rehearsing() -> bool:
    """True in a rehearsal of the GPU tests on the CPU (`--rehearse`)."""
    return os.environ.get(REHEARSAL) == "1"


def gpu_path(t: torch.Tensor) -> bool:
    """Whether code working on `t` takes its GPU path (GPU tiles, a GPU kernel): for a CUDA
    tensor, and for any tensor in a rehearsal, where the CPU plays the GPU."""
    return t.is_cuda or rehearsing()


def synchronize(device: torch.device | str) -> None:
    """Wait for the device's queued work (a no-op on the CPU, whose work is never queued)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def use_triton_interpreter_without_gpu() -> None:
    """Without CUDA, make Triton kernels run on the CPU through Triton's interpreter.

    Triton reads TRITON_INTERPRET when it is imported, so this must run first; the test
    plugin calls it before any kata is loaded.
    """
    if has_cuda() or os.environ.get("TRITON_INTERPRET") == "1":
        return
    if "triton" in sys.modules:
        raise RuntimeError(
            "triton was imported before the kata harness could switch on its CPU interpreter; "
            "set TRITON_INTERPRET=1 in the environment and run again"
        )
    os.environ["TRITON_INTERPRET"] = "1"


def triton_interpreted() -> bool:
    """True when Triton kernels run through the interpreter (slow; no bfloat16; never timed)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def interpreter_limit() -> str | None:
    """Why this Triton's interpreter cannot run the katas' kernels, or None when it can: before
    Triton 3.7 it cannot read a loop bound known only at run time beside NumPy 2."""
    import triton

    major, minor = (int(part) for part in triton.__version__.split(".")[:2])
    if triton_interpreted() and (major, minor) < (3, 7):
        return (
            f"Triton {triton.__version__}'s interpreter cannot run these kernels (run-time loop "
            "bounds); rehearsing them needs Triton 3.7 or later"
        )
    return None


def float_dtypes(*, triton: bool = False) -> list[torch.dtype]:
    """Floating dtypes a kata should support here. Triton's interpreter has no bfloat16."""
    dtypes = [torch.float32, torch.float16]
    if not (triton and triton_interpreted()):
        dtypes.append(torch.bfloat16)
    return dtypes


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
