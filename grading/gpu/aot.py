"""Compile an implementation's Triton kernels for real GPUs, ahead of time, without a GPU.

Triton's CPU interpreter accepts kernels a GPU compiler rejects (a `tl.dot` with K = 8, a tile
of 48 rows, two tiles of different shapes broadcast together), and it cannot say whether a kernel
would use tensor cores or spill registers. So every kata with kernels also compiles them, not
runs them, for the GPUs in TARGETS:

- A kata names the calls of its public API that launch kernels, as `GpuCall`s with the shapes
  and dtypes a GPU run uses (`GPU_CALLS` in `katas/<kata>/test_<kata>_compile.py`).
- `compile_calls` makes each call in a separate process without the interpreter, with tensors
  whose `is_cuda` is True, records the kernel launches instead of running them, and compiles
  each for each target with the launch's own arguments (grading/gpu/aot_worker.py). An
  implementation therefore chooses its GPU tiles from `q.is_cuda` (and dtype and shape), as it
  does on a GPU.
- Results are cached by the implementation's text, the calls and the Triton version, so an
  unchanged file costs nothing the second time; Triton caches the compiled kernels as well.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from grading.judge.impl import REPO_ROOT


@dataclass(frozen=True)
class Gpu:
    """What one streaming multiprocessor (SM) holds; occupancy is counted against these."""

    name: str
    registers: int = 65536  # 32-bit registers per SM, handed out per warp in units of 256
    warps: int = 64
    blocks: int = 32
    shared: int = 0  # bytes of shared memory per SM
    shared_per_block: int = 0  # the most one block may ask for
    reserved_per_block: int = 1024  # shared memory the system keeps for each block


TARGETS = {
    "sm_80": Gpu("A100", shared=167936, shared_per_block=166912),
    "sm_90": Gpu("H100/H200", shared=233472, shared_per_block=232448),
}


@dataclass(frozen=True)
class GpuCall:
    """One call of the implementation's public API, made as it would be on a GPU.

    `function(*tensors, **options)` with random tensors of `shapes` in `dtype` (a torch dtype's
    name, e.g. "float16").
    """

    function: str
    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    options: tuple[tuple[str, object], ...] = ()

    @property
    def label(self) -> str:
        shapes = ", ".join("x".join(map(str, s)) for s in self.shapes)
        options = "".join(f", {k}={v!r}" for k, v in self.options)
        return f"{self.function}({shapes} {self.dtype}{options})"

    def request(self) -> dict:
        return {
            "label": self.label,
            "function": self.function,
            "shapes": [list(s) for s in self.shapes],
            "dtype": self.dtype,
            "options": dict(self.options),
        }


@dataclass
class KernelBuild:
    """One kernel launched by one call, compiled for one target."""

    call: str
    kernel: str
    target: str
    config: dict
    error: str | None = None
    registers: int = 0
    spill_bytes: int = 0
    shared_bytes: int = 0
    tensor_cores: list[str] = field(default_factory=list)  # the instructions found, e.g. HGMMA
    num_warps: int = 0
    num_stages: int = 0
    binary: int = -1  # builds with the same number (per target) share one compiled kernel
    cubin: str | None = None  # the file, when asked to keep them
    unmeasured: str | None = None  # why registers and instructions could not be read

    def blocks_per_sm(self) -> int:
        """How many blocks of this kernel fit on one SM at once: the tightest limit wins."""
        gpu = TARGETS[self.target]
        regs_per_warp = -(-self.registers * 32 // 256) * 256
        limits = [gpu.blocks, gpu.warps // self.num_warps]
        if regs_per_warp:
            limits.append(gpu.registers // (regs_per_warp * self.num_warps))
        if self.shared_bytes:
            limits.append(gpu.shared // (self.shared_bytes + gpu.reserved_per_block))
        return min(limits)

    def occupancy(self) -> float:
        """Resident warps per SM as a fraction of the most an SM can hold."""
        return self.blocks_per_sm() * self.num_warps / TARGETS[self.target].warps

    def notes(self) -> list[str]:
        """One line for each visible reason this kernel is slower than it could be."""
        gpu, notes = TARGETS[self.target], []
        if self.unmeasured:
            return [f"registers and instructions not read: {self.unmeasured}"]
        if self.spill_bytes:
            notes.append(
                f"spills {self.spill_bytes} B per thread to local memory: {self.registers} "
                "registers were not enough (smaller tiles or fewer stages)"
            )
        if not self.tensor_cores:
            notes.append(
                "no tensor cores: no HMMA/HGMMA in the machine code "
                "(tl.dot on 16-bit tiles uses them)"
            )
        if self.shared_bytes and 2 * (self.shared_bytes + gpu.reserved_per_block) > gpu.shared:
            notes.append(
                f"one block per SM: {self.shared_bytes / 1024:.0f} KiB of shared memory; two fit "
                f"at {gpu.shared // 2 // 1024 - 1} KiB each (fewer stages or smaller tiles)"
            )
        return notes


@dataclass
class CompileResult:
    """What `compile_calls` found: per call, whether it ran; per launch and target, the build."""

    triton: str
    calls: list[dict]  # {"call", "function", "error", "not_implemented"?, "kernels"?}
    builds: list[KernelBuild]
    unavailable: dict[str, str]  # target -> why this Triton cannot compile for it
    error: str | None = None  # the implementation could not even be imported

    def for_function(self, *functions: str) -> CompileResult:
        calls = [c for c in self.calls if c["function"] in functions]
        labels = {c["call"] for c in calls}
        builds = [b for b in self.builds if b.call in labels]
        return CompileResult(self.triton, calls, builds, self.unavailable, self.error)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "inference-katas" / "kernel-builds"


def _triton_version() -> str:
    try:
        return version("triton")
    except PackageNotFoundError:
        return "none"


def compile_calls(
    impl: Path, calls: list[GpuCall], targets=tuple(TARGETS), keep: Path | None = None
) -> CompileResult:
    """Compile every kernel the calls launch, for each target (cached unless `keep` is set).

    `keep`: a folder to write each cubin into (for tools such as cuobjdump and nvdisasm).
    """
    request = {
        "impl": str(Path(impl).resolve()),
        "calls": [c.request() for c in calls],
        "targets": list(targets),
        "keep": str(keep) if keep else None,
    }
    worker = Path(__file__).with_name("aot_worker.py")
    key = hashlib.sha256(
        json.dumps(request["calls"] + request["targets"]).encode()
        + Path(impl).read_bytes()
        + worker.read_bytes()
        + _triton_version().encode()
    ).hexdigest()[:32]
    cached = cache_dir() / f"{key}.json"
    if keep is None and cached.is_file():
        return _parse(json.loads(cached.read_text()))
    raw = _run_workers(request)
    if keep is None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(raw))
        partial.replace(cached)  # atomic: test processes running side by side share the cache
    return _parse(raw)


def _run_workers(request: dict) -> dict:
    """One grading.gpu.aot_worker process per target, side by side; their results merged."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    with tempfile.TemporaryDirectory() as tmp:
        workers = []
        for target in request["targets"]:
            files = [Path(tmp) / f"{target}.{end}" for end in ("request", "json", "log")]
            files[0].write_text(json.dumps({**request, "targets": [target]}))
            with files[2].open("w") as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", "grading.gpu.aot_worker", str(files[0]), str(files[1])],
                    stdout=subprocess.DEVNULL,  # whatever the implementation prints
                    stderr=log,
                    cwd=REPO_ROOT,
                    env=env,
                )
            workers.append((process, target, files))
        results = []
        for process, target, (_, out, log) in workers:
            if process.wait() != 0 or not out.is_file():
                raise RuntimeError(
                    f"the kernel compiler process for {target} failed (exit code "
                    f"{process.returncode}):\n{log.read_text()[-3000:]}"
                )
            results.append(json.loads(out.read_text()))
    merged = dict(results[0], builds=[], unavailable={})
    for result in results:
        merged["builds"] += result["builds"]
        merged["unavailable"].update(result["unavailable"])
    return merged


def _parse(raw: dict) -> CompileResult:
    fields = set(KernelBuild.__dataclass_fields__)
    builds = [KernelBuild(**{k: v for k, v in b.items() if k in fields}) for b in raw["builds"]]
    return CompileResult(
        triton=raw.get("triton", "?"),
        calls=raw["calls"],
        builds=builds,
        unavailable=raw["unavailable"],
        error=raw.get("error"),
    )


def as_json(build: KernelBuild) -> dict:
    """The report's pinned JSON shape for one build."""
    data = asdict(build)
    return {
        "kernel": data["kernel"],
        "target": data["target"],
        "config": data["config"],
        "registers": data["registers"],
        "spill_bytes": data["spill_bytes"],
        "shared_bytes": data["shared_bytes"],
        "tensor_cores": bool(data["tensor_cores"]),
    }


def check_compiles(result: CompileResult, target: str) -> None:
    """Fail the test, naming the configuration and quoting the compiler, unless every kernel
    the calls launch compiles for `target` and fits its shared memory. Skips only where the
    installed Triton cannot compile for `target` at all."""
    import pytest

    if result.error:
        pytest.fail(f"the implementation could not be imported: {result.error}", pytrace=False)
    if target in result.unavailable:
        pytest.skip(result.unavailable[target])
    for call in result.calls:
        if call.get("not_implemented"):
            raise NotImplementedError(call["not_implemented"])
    problems = [f"{c['call']} raised {c['error']}" for c in result.calls if c["error"]]
    problems += [
        f"{c['call']} launched no Triton kernel (on a GPU it should run one)"
        for c in result.calls
        if not c["error"] and c.get("kernels") == 0
    ]
    builds = [b for b in result.builds if b.target == target]
    by_error: dict[str, list[KernelBuild]] = {}
    for b in builds:
        if b.error:
            by_error.setdefault(b.error, []).append(b)
    for error, failed in by_error.items():
        b = failed[0]
        also = f" (and {len(failed) - 1} more launches)" if len(failed) > 1 else ""
        problems.append(
            f"{b.kernel} does not compile for {target} ({TARGETS[target].name}) with "
            f"{_config(b)}, launched by {b.call}{also}:\n{error}"
        )
    limit = TARGETS[target].shared_per_block
    for b in builds:
        if not b.error and b.shared_bytes > limit:
            problems.append(
                f"{b.kernel} with {_config(b)} needs {b.shared_bytes} bytes of shared memory per "
                f"block; {TARGETS[target].name} ({target}) allows {limit}, so the launch fails "
                "with 'out of resources': use fewer stages or smaller tiles"
            )
    if problems:
        failing = sum(b.error is not None for b in builds)
        head = (
            f"{failing} of {len(builds)} kernel launches fail to compile for {target}; "
            "Triton's CPU interpreter accepts code that the GPU compiler rejects"
            if failing
            else f"the kernels would not run on {target}"
        )
        shown = problems[:3] + ([f"... and {len(problems) - 3} more"] if len(problems) > 3 else [])
        pytest.fail(head + "\n\n" + "\n\n".join(shown), pytrace=False)


def _config(build: KernelBuild) -> str:
    return ", ".join(f"{k}={v}" for k, v in build.config.items())
