"""The compiling half of grading.gpu.aot, run in its own process:
`python -m grading.gpu.aot_worker`.

It must run without Triton's interpreter (the parent process removes TRITON_INTERPRET), so that
`@triton.jit` gives real JITFunctions. For each requested call it imports the implementation,
calls the function with tensors that say they are on CUDA, and records the kernel launches
instead of running them. Then it compiles each launch for each target through Triton's own
launch path (`JITFunction.run(..., warmup=True)`) with a stand-in driver that names the target,
so specialisation, options and caching are exactly those of a real launch. Machine code is read
with the cuobjdump that ships with Triton.

`python -m grading.gpu.aot_worker REQUEST RESULT`: reads the JSON request ({"impl", "calls",
"targets", "keep"}) from the file REQUEST and writes the result, as JSON, to the file RESULT.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
from triton.runtime.autotuner import Autotuner
from triton.runtime.jit import JITFunction

from grading.grade.plugin import guard_worker_process
from grading.judge.impl import load_module

TENSOR_CORE_OPS = re.compile(r"\b(HMMA|HGMMA|IMMA|IGMMA|QGMMA|BGMMA|UTCHMMA|UTCQMMA)\b")
RESOURCES = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")


class TargetDriver:
    """Enough of a Triton driver to compile for `capability` without a GPU; launches nothing.

    Triton caches compiled kernels per device, so each capability poses as its own device.
    """

    def __init__(self, capability: int):
        self.capability = capability

    def get_current_device(self) -> int:
        return self.capability

    def get_current_stream(self, device=None) -> int:
        return 0

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("cuda", self.capability, 32)


@contextlib.contextmanager
def as_if_on_a_gpu(launches: list):
    """Tensors say `is_cuda`; kernel launches and autotuning are recorded in `launches`."""

    def record(self, *args, grid, warmup, **kwargs):
        launches.append((self, args, kwargs))

    def every_config(self, *args, **kwargs):  # autotuning would time each config: record each
        for config in self.configs:
            self.fn.run(*args, **kwargs, **config.all_kwargs())

    saved = {
        (JITFunction, "run"): JITFunction.__dict__["run"],
        (Autotuner, "run"): Autotuner.__dict__["run"],
        (torch.Tensor, "is_cuda"): torch.Tensor.__dict__.get("is_cuda"),
    }
    saved_env = os.environ.get("TRITON_INTERPRET")
    JITFunction.run = record
    Autotuner.run = every_config
    torch.Tensor.is_cuda = property(lambda self: True)
    # Code that checks for the interpreter before launching on CPU tensors goes on to launch.
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield launches
    finally:
        for (owner, name), value in saved.items():
            if value is None:
                delattr(owner, name)
            else:
                setattr(owner, name, value)
        if saved_env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved_env


def call_as_on_a_gpu(module, call: dict) -> list:
    """The kernel launches `module.<function>(*tensors, **options)` makes on a GPU."""
    gen = torch.Generator().manual_seed(0)
    dtype = getattr(torch, call["dtype"])
    tensors = [torch.randn(shape, generator=gen).to(dtype) for shape in call["shapes"]]
    launches: list = []
    with as_if_on_a_gpu(launches):
        getattr(module, call["function"])(*tensors, **call["options"])
    return launches


def tool(name: str) -> str:
    """A CUDA binary that ships with Triton (backends/nvidia/bin), else one on PATH."""
    shipped = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    found = str(shipped) if shipped.is_file() else shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} is neither in Triton's backends/nvidia/bin nor on PATH")
    return found


def measure(compiled, keep: Path | None, stem: str) -> dict:
    """Registers, local memory, shared memory and tensor-core use, read from the cubin."""
    with tempfile.TemporaryDirectory() as tmp:
        cubin = (keep or Path(tmp)) / f"{stem}.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run(
            [tool("cuobjdump"), "-res-usage", str(cubin)], capture_output=True, text=True
        ).stdout
        sass = subprocess.run(
            [tool("cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True
        ).stdout
    found = RESOURCES.search(usage)
    if found is None:
        raise RuntimeError(f"cuobjdump -res-usage printed no resource line:\n{usage}")
    regs, stack, static_shared, local = map(int, found.groups())
    return {
        "registers": regs,
        "spill_bytes": stack + local,  # per thread: the stack frame spilled registers go to
        "shared_bytes": static_shared + int(compiled.metadata.shared),
        "tensor_cores": sorted(set(TENSOR_CORE_OPS.findall(sass))),
        "num_warps": int(compiled.metadata.num_warps),
        "num_stages": int(compiled.metadata.num_stages),
        "cubin": str(cubin) if keep else None,
    }


def measure_once(compiled, keep: Path | None, fn, target: str, binary: int) -> dict:
    """`measure`, or what the compiler's metadata says where the CUDA tools are missing."""
    try:
        return {"binary": binary, **measure(compiled, keep, f"{fn.__name__}-{target}-{binary}")}
    except (OSError, RuntimeError) as exc:
        return {
            "binary": binary,
            "shared_bytes": int(compiled.metadata.shared),
            "num_warps": int(compiled.metadata.num_warps),
            "num_stages": int(compiled.metadata.num_stages),
            "unmeasured": first_lines(exc, 3),
        }


def constexprs(fn, args: tuple, kwargs: dict) -> dict:
    """The compile-time arguments of one launch, by name."""
    values = dict(zip([p.name for p in fn.params], args, strict=False))  # then keywords
    values.update(kwargs)
    return {p.name: values[p.name] for p in fn.params if p.is_constexpr and p.name in values}


def first_lines(exc: BaseException, limit: int = 3) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return "\n".join(text.splitlines()[:limit])


def compiler_message(exc: BaseException) -> str:
    """The compiler's own complaint: the innermost error in the chain, with its source line."""
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    # Each nested @triton.jit call wraps the error of the one it calls: the last one is the cause.
    located = [e for e in chain if type(e).__name__ == "CompilationError"]
    if located:
        lines = str(located[-1]).strip().splitlines()
        return "\n".join(lines[:1] + lines[-8:])  # "at line:col:", then the lines that fail
    return first_lines(chain[-1], 20)


def compile_target(target: str, launches: list, keep: Path | None) -> tuple[list, str | None]:
    """Compile each (call, fn, args, kwargs) for `target`; (builds, None) or ([], why not)."""
    capability = int(target.removeprefix("sm_"))
    try:
        driver.set_active(TargetDriver(capability))
        _probe_kernel.run(torch.empty(16), grid=(1,), warmup=True, BLOCK=16)
    except Exception as exc:  # this Triton cannot compile for the target at all
        return [], f"Triton {triton.__version__} cannot compile for {target}: {first_lines(exc, 3)}"
    builds, measured = [], {}
    for call, fn, args, kwargs in launches:
        build = {"call": call["label"], "kernel": fn.__name__, "target": target}
        build["config"] = {"dtype": call["dtype"], **constexprs(fn, args, kwargs)}
        build["config"].update({k: kwargs[k] for k in ("num_warps", "num_stages") if k in kwargs})
        try:
            compiled = fn.run(*args, grid=(1,), warmup=True, **kwargs)
            if id(compiled) not in measured:
                measured[id(compiled)] = measure_once(compiled, keep, fn, target, len(measured))
            build.update(measured[id(compiled)])
            build["config"].update(num_warps=build["num_warps"], num_stages=build["num_stages"])
            build["error"] = None
        except Exception as exc:
            build["error"] = compiler_message(exc)
        builds.append(build)
    return builds, None


@triton.jit
def _probe_kernel(X, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(X + offs, tl.load(X + offs) + 1)


def main() -> None:
    warnings.simplefilter("ignore")  # Triton's deprecation notes are not the learner's business
    request = json.loads(Path(sys.argv[1]).read_text())
    keep = Path(request["keep"]) if request.get("keep") else None
    result: dict = {"calls": [], "builds": [], "unavailable": {}}
    result["triton"] = triton.__version__
    guard_worker_process()  # under the grader, the submission's code runs under its rules here too
    try:
        module = load_module(Path(request["impl"]), "impl_compiled_ahead_of_time")
    except Exception as exc:
        result["error"] = first_lines(exc, 20)
        Path(sys.argv[2]).write_text(json.dumps(result))
        return
    launches = []
    for call in request["calls"]:
        entry = {"call": call["label"], "function": call["function"], "error": None}
        try:
            found = call_as_on_a_gpu(module, call)
            entry["kernels"] = len(found)
            launches += [(call, fn, args, kwargs) for fn, args, kwargs in found]
        except NotImplementedError as exc:
            entry["not_implemented"] = str(exc)
        except Exception as exc:
            entry["error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        result["calls"].append(entry)
    for target in request["targets"]:
        builds, unavailable = compile_target(target, launches, keep)
        result["builds"] += builds
        if unavailable:
            result["unavailable"][target] = unavailable
    Path(sys.argv[2]).write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
