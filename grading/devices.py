"""Where the katas run: CUDA when there is a GPU, otherwise the CPU with Triton's interpreter.

The GPU tests (`katas/*/test_*_gpu.py`) take where and how big they run from one object, the
`gpu` fixture (a `GpuRun`): on a GPU machine its device is CUDA and its sizes are the real ones;
in a rehearsal (`pytest katas -m gpu --rehearse`) the CPU stands in for the GPU, the sizes are
small, Triton kernels run through the interpreter, and speed targets are recorded, not judged.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import torch

from grading.rehearsal import Work

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


@dataclass
class GpuRun:
    """Where and how big a GPU test runs: the one device and the one size switch GPU tests use.

    `device` is CUDA on a GPU machine and the CPU in a rehearsal. `size(real, rehearsed)` picks
    a dimension (a sequence length, a model width), `count(real, rehearsed)` a number of things
    done (requests, tokens, sweep points), `dtype(d)` a dtype (bfloat16 becomes float16 in a
    rehearsal: Triton's interpreter has no bfloat16), and `bench(fn)` times a call. In a
    rehearsal `work` keeps how much larger the real run is and what its benchmarks ask for, from
    which the GPU check estimates the test's time (`grading.rehearsal`).
    """

    device: torch.device
    rehearsal: bool
    work: Work = field(default_factory=Work)

    @classmethod
    def here(cls, rehearse: bool) -> GpuRun:
        return cls(torch.device("cpu") if rehearse else torch.device("cuda"), rehearse)

    def size(self, real, rehearsed):
        if self.rehearsal and isinstance(real, (int, float)):  # None: the real run's default
            self.work.size_scale = max(self.work.size_scale, real / rehearsed)
        return rehearsed if self.rehearsal else real

    def count(self, real: int, rehearsed: int) -> int:
        if self.rehearsal:
            self.work.count_scale = max(self.work.count_scale, real / rehearsed)
        return rehearsed if self.rehearsal else real

    def dtype(self, dtype: torch.dtype) -> torch.dtype:
        return torch.float16 if self.rehearsal and dtype == torch.bfloat16 else dtype

    def generator(self, seed: int) -> torch.Generator:
        return torch.Generator(device=self.device).manual_seed(seed)

    def randn(self, *shape: int, seed: int, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
        """Random inputs drawn on the device: for timing, values only need to be ordinary."""
        gen = self.generator(seed)
        return torch.randn(shape, generator=gen, device=self.device, dtype=self.dtype(dtype))

    def bench(self, fn, *, warmup: int = 25, rep: int = 100) -> float:
        """Median milliseconds per call (`grading.attention.bench`: `triton.testing.do_bench` on
        a GPU, the CPU's clock in a rehearsal)."""
        from grading.attention import bench

        self.work.bench_ms += warmup + rep
        return bench(fn, warmup=warmup, rep=rep)

    def extra_memory(self, fn) -> tuple[int, int]:
        """(bytes allocated at the peak of one call of `fn` beyond what was there before, bytes
        of its output). In a rehearsal the CPU keeps no allocation statistics: the largest
        tensor the call made, as the cost counters see it (a lower bound of the peak)."""
        fn()  # compile and warm up outside the measurement
        if self.device.type != "cuda":
            from grading.rehearsal import largest_tensor_bytes

            out, nbytes = largest_tensor_bytes(fn)
            return nbytes, out.numel() * out.element_size()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before, out.numel() * out.element_size()
