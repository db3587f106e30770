"""What each kata forbids, and which functions must launch a Triton kernel.

Keyed by kata, then by the public name the tests call (`"Class.method"` for a method). A new kata
that needs a rule adds one entry here; every other guard (inputs left alone, counters always on,
nothing off the books, grad mode, the judge unchanged) applies to every kata without an entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from grading.observe import observing

# PyTorch's fused attention, at the level of its operators (what the counters see): the public
# scaled_dot_product_attention dispatches to one of these.
FUSED_ATTENTION = frozenset(
    {
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_fused_attention_overrideable",
        "_flash_attention_forward",
        "_efficient_attention_forward",
        "_fused_sdp_choice",
        "flex_attention",
    }
)


@dataclass(frozen=True)
class Rule:
    forbidden: frozenset[str] = frozenset()  # PyTorch operators the function may not call
    why: str = ""  # what the forbidden calls would skip: the point of the exercise
    kernel: bool = False  # True: the task is a Triton kernel, so each call must launch one
    # Run once, after the first call that succeeded, with the function and that call's
    # arguments by name: extra calls of the harness's own. Returns what is wrong, or None.
    probe: Callable[[Callable, dict], str | None] | None = None


def spreads_keys_over_programs(split_kv_decode: Callable, args: dict) -> str | None:
    """num_splits is really used: over 256 keys in 4 splits, no kernel program reads them all.

    Splits are whole key blocks; with blocks of at most 128 keys, 256 keys make at least two
    ranges. A kernel that ignores num_splits has one program read every key (counted under
    Triton's interpreter, the CPU's way to run kernels; a GPU run checks nothing here).
    """
    q = args["q"]
    D, N, S = q.shape[-1], 256, 4
    gen = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(shape, generator=gen).to(q)
        for shape in [(1, 1, 1, D), (1, 1, N, D), (1, 1, N, D)]
    )
    with observing() as seen:
        split_kv_decode(q, k, v, num_splits=S)
    most = max((launch.most_loaded_by_one_program for launch in seen.launches), default=0)
    if most >= 2 * N * D:
        return (
            f"num_splits ignored: split_kv_decode(q, k, v, num_splits={S}) over {N} keys had one "
            f"kernel program read {most} elements, every key and value ({2 * N * D}); each "
            "program should read only its own range of keys (the third grid axis)"
        )
    return None


_ATTENTION = Rule(FUSED_ATTENTION, "PyTorch's fused attention does the exercise for you")
_KERNEL = Rule(FUSED_ATTENTION, "the task is to write the kernel yourself", kernel=True)
_SPLIT_KERNEL = Rule(
    FUSED_ATTENTION,
    "the task is to write the kernel yourself",
    kernel=True,
    probe=spreads_keys_over_programs,
)

RULES: dict[str, dict[str, Rule]] = {
    "flash_attention": {
        "tiled_attention": _ATTENTION,
        "flash_attention": _KERNEL,
        "flash_attention_with_lse": _KERNEL,
        "split_kv_decode": _SPLIT_KERNEL,
        "combine_partials": _ATTENTION,
    },
    "efficient_attention": {
        "sliding_window_attention": _ATTENTION,
        "block_sparse_attention": _ATTENTION,
        "linear_attention": _ATTENTION,
        "linear_attention_step": _ATTENTION,
        "sliding_window_decode_step": _ATTENTION,
    },
}


def rules_for(kata: str) -> dict[str, Rule]:
    return RULES.get(kata, {})
