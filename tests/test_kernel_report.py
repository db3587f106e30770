"""Kernels compiled ahead of time (grading.gpu.aot), the kernel report, and kernels outside pytest.

The report's numbers for the reference are checked against the CUDA tools that ship with Triton
(backends/nvidia/bin): cuobjdump for registers and memory, nvdisasm for the instructions.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import triton

from grading.gpu.aot import CompileResult, GpuCall, KernelBuild, check_compiles, compile_calls
from grading.gpu.kernel_report import main as kernel_report
from grading.judge.impl import REPO_ROOT

REFERENCE = REPO_ROOT / "reference" / "flash_attention.py"
CUDA_BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
PINNED = {"kernel", "target", "config", "registers", "spill_bytes", "shared_bytes", "tensor_cores"}


def attention_call(D: int, dtype: str, causal: bool) -> GpuCall:
    shapes = ((2, 4, 1024, D), (2, 2, 1024, D), (2, 2, 1024, D))
    return GpuCall("flash_attention", shapes, dtype, (("causal", causal),))


def tool_output(name: str, *args: str) -> str:
    done = subprocess.run([str(CUDA_BIN / name), *args], capture_output=True, text=True)
    assert done.returncode == 0, f"{name} {' '.join(args)} failed:\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def head_dim_128(tmp_path_factory) -> CompileResult:
    """The reference's forward kernel at head dim 128, cubins kept for the CUDA tools."""
    calls = [attention_call(128, dtype, causal=False) for dtype in ("float16", "bfloat16")]
    result = compile_calls(REFERENCE, calls, keep=tmp_path_factory.mktemp("cubins"))
    for target, why in result.unavailable.items():
        pytest.skip(f"{target}: {why}")
    return result


def test_reference_forward_kernel_uses_tensor_cores_and_spills_nothing_on_sm_90(head_dim_128):
    builds = [b for b in head_dim_128.builds if b.target == "sm_90"]
    assert len(builds) == 2 and not any(b.error for b in builds), builds
    for b in builds:
        assert b.kernel == "_attention_fwd_kernel" and b.config["HEAD_DIM"] == 128
        assert b.tensor_cores, f"{b.call}: no tensor-core instruction in the sm_90 machine code"
        assert b.spill_bytes == 0, f"{b.call}: spills {b.spill_bytes} bytes per thread on sm_90"


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_report_numbers_agree_with_cuobjdump_and_nvdisasm(head_dim_128, target):
    resources = r"Function (\w+):\s+REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)"
    for b in (b for b in head_dim_128.builds if b.target == target):
        usage = tool_output("cuobjdump", "-res-usage", b.cubin)
        found = re.search(resources, usage)
        assert found, usage
        name, regs, stack, shared, local = found[1], *map(int, found.groups()[1:])
        assert name == b.kernel
        assert b.registers == regs
        assert b.spill_bytes == stack + local
        assert b.shared_bytes >= shared  # the static part; Triton asks for the rest at launch
        sass = tool_output("nvdisasm", b.cubin)
        mma = {"sm_80": r"\bHMMA\b", "sm_90": r"\b(HGMMA|HMMA)\b"}[target]
        assert bool(b.tensor_cores) == bool(re.search(mma, sass))
        assert (b.spill_bytes > 0) == bool(re.search(r"\bSTL\b", sass)), "spills are local stores"


def test_report_flags_visible_reasons_for_slowness():
    base = dict(call="c", kernel="k", config={}, num_warps=8, num_stages=3, binary=0)
    good = KernelBuild(
        target="sm_90", registers=128, shared_bytes=64 * 1024, tensor_cores=["HGMMA"], **base
    )
    assert good.notes() == [] and good.blocks_per_sm() == 2 and good.occupancy() == 0.25
    bad = KernelBuild(target="sm_80", registers=255, spill_bytes=16, shared_bytes=96 * 1024, **base)
    notes = bad.notes()
    assert len(notes) == 3 and bad.blocks_per_sm() == 1
    for word, note in zip(("spills", "no tensor cores", "one block per SM"), notes, strict=True):
        assert note.startswith(word) and "\n" not in note


def test_kernel_report_json_has_the_pinned_shape(capsys):
    code = kernel_report(["flash_attention", "--impl", "reference", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report and all(set(entry) == PINNED for entry in report)
    assert {entry["target"] for entry in report} == {"sm_80", "sm_90"}
    for entry in report:
        assert isinstance(entry["registers"], int) and isinstance(entry["tensor_cores"], bool)
        if entry["target"] == "sm_90" and entry["config"]["HEAD_DIM"] == 128:
            assert entry["tensor_cores"] and entry["spill_bytes"] == 0, entry


def test_compile_checks_skip_only_where_triton_cannot_compile():
    result = CompileResult("3.0", calls=[], builds=[], unavailable={"sm_80": "no ptxas"})
    with pytest.raises(pytest.skip.Exception, match="no ptxas"):
        check_compiles(result, "sm_80")
    check_compiles(result, "sm_90")  # nothing launched, nothing to fail
    stub = {"call": "f()", "function": "f", "error": None, "not_implemented": "level 2: ..."}
    with pytest.raises(NotImplementedError, match="level 2"):
        check_compiles(CompileResult("3.0", [stub], [], {}), "sm_90")


SCRIPT = """
import torch
import torch.nn.functional as F
import katas.flash_attention.solution  # what a learner's script imports: sets up Triton
from grading.devices import default_device
from reference.flash_attention import flash_attention

q, k, v = torch.randn(3, 1, 2, 40, 16, device=default_device())
out = flash_attention(q, k, v, causal=True)
expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
torch.testing.assert_close(out.double(), expected, rtol=1e-4, atol=1e-4)
print("kernel ran")
"""


def test_a_plain_script_runs_a_kata_kernel_without_the_harness():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and "kernel ran" in done.stdout, done.stderr[-3000:]
