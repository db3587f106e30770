"""The rehearsal of the GPU tests on the CPU, and what it says about the real run.

`pytest katas -m gpu --rehearse` runs every GPU test on the CPU at small sizes (see
`GpuRun` below). Each test runs under `Tally`, which counts what it did: PyTorch
operators launched, Triton kernels launched and which ones, FLOPs, bytes the operators wrote, and
the time its benchmarks ask for. `estimate_seconds` turns one test's tally into a rough time on
an H200; with `--plan PATH` the rehearsal writes every test's tally and estimate there, and the
prepared GPU check (`grading.gpu.check`) plans its run from that file.

The estimate is deliberately simple (an order of magnitude, erring long):

- every operator launch costs LAUNCH_S (eager PyTorch's host overhead dominates small kernels);
- FLOPs at H200_FLOPS and bytes at H200_BYTES_PER_S, both scaled from the rehearsal's sizes to
  the real ones by the square of the largest size ratio the test asked for;
- launches scaled by the largest count ratio (more requests, more tokens: more steps);
- each distinct Triton kernel (name, dtypes, constants) compiles once per process (COMPILE_S);
  each benchmark spends what it asks for
  (`warmup` + `rep` milliseconds of `triton.testing.do_bench`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from grading.devices import bench
from grading.judge.impl import REPO_ROOT

PLAN = REPO_ROOT / "results" / "gpu_plan.json"  # written by `nox -s rehearse`
H200_BYTES_PER_S = 4.8e12  # HBM3e bandwidth
H200_FLOPS = 990e12  # dense bfloat16 tensor-core FLOP/s
LAUNCH_S = 8e-6  # one eager operator or kernel launch, host side
COMPILE_S = 3.0  # one Triton kernel's first compilation
MIN_TEST_S = 1.0  # collection, fixtures, synchronisation: no test is free


@dataclass
class Work:
    """What one GPU test did in the rehearsal."""

    ops: int = 0  # PyTorch operators launched
    flops: int = 0
    bytes: int = 0  # written by those operators
    triton_launches: int = 0
    kernels: list[str] = field(default_factory=list)  # distinct Triton kernels launched
    bench_ms: float = 0.0  # warmup + rep asked of the benchmark helper, summed
    size_scale: float = 1.0  # real sizes / rehearsed sizes, the largest ratio
    count_scale: float = 1.0  # real counts (requests, tokens, repeats) / rehearsed ones

    def estimate_seconds(self, compiled: set[str] | None = None) -> float:
        """A rough time for the real test on an H200 (see the module's docstring), in a process
        that has compiled the kernels in `compiled` already (this test's are added to it)."""
        area = self.size_scale**2
        launches = (self.ops + self.triton_launches) * self.count_scale
        new_kernels = set(self.kernels) - (compiled or set())
        if compiled is not None:
            compiled |= new_kernels
        return (
            MIN_TEST_S
            + launches * LAUNCH_S
            + self.flops * area * self.count_scale / H200_FLOPS
            + self.bytes * area * self.count_scale / H200_BYTES_PER_S
            + len(new_kernels) * COMPILE_S
            + self.bench_ms / 1e3
        )


class Tally(TorchDispatchMode):
    """Counts the operators, FLOPs and bytes of everything run inside it, into `work`."""

    def __init__(self, work: Work) -> None:
        from grading.judge.operators import FORMULAS  # PyTorch's formulas, plus its CPU attention's

        super().__init__()
        self.work = work
        self.formulas = FORMULAS

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.is_view:
            return out
        work = self.work
        work.ops += 1
        formula = self.formulas.get(func._overloadpacket)
        if formula is not None:
            work.flops += int(formula(*args, **kwargs, out_val=out))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                work.bytes += t.numel() * t.element_size()
        return out


def kernel_key(name: str, args: tuple, kwargs: dict) -> str:
    """What Triton compiles one binary for: the kernel, its tensors' dtypes, its constants."""
    dtypes = ",".join(str(a.dtype).removeprefix("torch.") for a in args if hasattr(a, "dtype"))
    constants = ",".join(f"{k}={v}" for k, v in sorted(kwargs.items()))
    return f"{name}({dtypes}; {constants})"


def triton_launch_counters(work: Work) -> list:
    """(class, replacements) that count Triton launches into `work`, compiled or interpreted."""
    try:
        from triton.runtime import interpreter, jit
    except ImportError:
        return []

    def counting(run):
        def counted_run(self, *args, grid, warmup, **kwargs):
            if not warmup:
                work.triton_launches += 1
                key = kernel_key(getattr(self.fn, "__name__", "kernel"), args, kwargs)
                if key not in work.kernels:
                    work.kernels.append(key)
            return run(self, *args, grid=grid, warmup=warmup, **kwargs)

        return counted_run

    return [
        (cls, {"run": counting(cls.run)})
        for cls in (jit.JITFunction, getattr(interpreter, "InterpretedFunction", None))
        if cls is not None and "run" in cls.__dict__
    ]


class _Largest(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.nbytes = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # entering must not import torch._dynamo, which replaces torch functions

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view and not func._overloadpacket.__name__.endswith("_"):
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    self.nbytes = max(self.nbytes, t.numel() * t.element_size())
        return out


def largest_tensor_bytes(fn) -> tuple[object, int]:
    """(fn(), bytes of the largest tensor a PyTorch operator made during the call): on the CPU,
    which keeps no allocation statistics, a lower bound of the call's extra memory."""
    with _Largest() as mode:
        out = fn()
    return out, mode.nbytes


@dataclass
class PlannedTest:
    """One GPU test in the GPU check's plan."""

    id: str  # pytest node id
    kata: str
    kind: str  # "correctness", "headline" or "sweep"
    seconds: float  # estimated on an H200
    work: Work


def write_plan(tests: list[PlannedTest], path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    rows = [asdict(t) | {"seconds": round(t.seconds, 1)} for t in tests]
    Path(path).write_text(json.dumps(rows, indent=1) + "\n")


def read_plan(path: str | Path) -> list[PlannedTest]:
    tests = []
    for row in json.loads(Path(path).read_text()):
        tests.append(PlannedTest(**{**row, "work": Work(**row["work"])}))
    return tests


@dataclass
class GpuRun:
    """Where and how big a GPU test runs: the one device and the one size switch GPU tests use.

    `device` is CUDA on a GPU machine and the CPU in a rehearsal. `size(real, rehearsed)` picks
    a dimension (a sequence length, a model width), `count(real, rehearsed)` a number of things
    done (requests, tokens, sweep points), `dtype(d)` a dtype (bfloat16 becomes float16 in a
    rehearsal: Triton's interpreter has no bfloat16), and `bench(fn)` times a call. In a
    rehearsal `work` keeps how much larger the real run is and what its benchmarks ask for, from
    which the GPU check estimates the test's time (see the module's docstring).
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
        """Median milliseconds per call (`grading.devices.bench`: `triton.testing.do_bench` on
        a GPU, the CPU's clock in a rehearsal)."""
        self.work.bench_ms += warmup + rep
        return bench(fn, warmup=warmup, rep=rep)

    def extra_memory(self, fn) -> tuple[int, int]:
        """(bytes allocated at the peak of one call of `fn` beyond what was there before, bytes
        of its output). In a rehearsal the CPU keeps no allocation statistics: the largest
        tensor the call made, as the cost counters see it (a lower bound of the peak)."""
        fn()  # compile and warm up outside the measurement
        if self.device.type != "cuda":
            out, nbytes = largest_tensor_bytes(fn)
            return nbytes, out.numel() * out.element_size()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before, out.numel() * out.element_size()
