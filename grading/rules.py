"""What each kata forbids, and which functions must launch a Triton kernel.

Keyed by kata, then by the public name the tests call (`"Class.method"` for a method). A new kata
that needs a rule adds one entry here; every other guard (inputs left alone, counters always on,
nothing off the books, grad mode, the judge unchanged) applies to every kata without an entry.
"""

from __future__ import annotations

from dataclasses import dataclass

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


_ATTENTION = Rule(FUSED_ATTENTION, "PyTorch's fused attention does the exercise for you")
_KERNEL = Rule(FUSED_ATTENTION, "the task is to write the kernel yourself", kernel=True)

RULES: dict[str, dict[str, Rule]] = {
    "flash_attention": {
        "tiled_attention": _ATTENTION,
        "flash_attention": _KERNEL,
        "flash_attention_with_lse": _KERNEL,
        "split_kv_decode": _KERNEL,
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
