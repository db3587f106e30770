"""Where the katas run: CUDA when there is a GPU, otherwise the CPU with Triton's interpreter."""

from __future__ import annotations

import os
import sys

import torch


def has_cuda() -> bool:
    return torch.cuda.is_available()


def default_device() -> torch.device:
    return torch.device("cuda" if has_cuda() else "cpu")


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


def float_dtypes(*, triton: bool = False) -> list[torch.dtype]:
    """Floating dtypes a kata should support here. Triton's interpreter has no bfloat16."""
    dtypes = [torch.float32, torch.float16]
    if not (triton and triton_interpreted()):
        dtypes.append(torch.bfloat16)
    return dtypes
