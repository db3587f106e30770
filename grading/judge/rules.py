"""What each kata forbids, which functions must launch a Triton kernel, and what work a call may do.

Keyed by kata, then by the public name the tests call (`"Class.method"` for a method). A new kata
that needs a rule adds one entry here; every other guard (inputs left alone, counters always on,
nothing off the books, grad mode, the judge unchanged) applies to every kata without an entry.

A budget bounds the work of every call of a function (FLOPs of products plus the elements every
PyTorch operator reads and writes, `Observation.work`, plus the elements Triton kernels load,
counted under the interpreter), not only the calls a cost test measures: an implementation
cannot save its efficient path for the calls it guesses are measured. Budgets are generous (a few
times what the reference does, plus room for small inputs); the cost tests hold the tighter
bounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from grading.judge.observe import observing

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


# Work any call may do, whatever its size (checking the arguments, small tensors).
ANY_CALL = 1 << 14


@dataclass(frozen=True)
class Budget:
    work: int  # the most work (FLOPs plus elements read and written) the call may do
    what: str  # the formula, in the README's words
    # The most multiplications (elementwise, matrix-vector and matrix products) the call may do
    # outside kernels, and that formula in the README's words; None: bounded by `work` alone.
    products: int | None = None
    products_what: str = ""
    # Where the task is a kernel: the most elements its programs may load in the call, and that
    # formula; `work` then bounds what happens outside the kernel. None: a kernel's loads count
    # in `work` like any operator's reads (a kernel is no way round the budget).
    kernel_loads: int | None = None
    kernel_what: str = ""


@dataclass(frozen=True)
class Rule:
    forbidden: frozenset[str] = frozenset()  # PyTorch operators the function may not call
    why: str = ""  # what the forbidden calls would skip: the point of the exercise
    kernel: bool = False  # True: the task is a Triton kernel, so each call must launch one
    # Run once, after the first call that succeeded, with the function and that call's
    # arguments by name: extra calls of the harness's own. Returns what is wrong, or None.
    probe: Callable[[Callable, dict], str | None] | None = None
    # From the arguments of a call that succeeded, by name (defaults included): the most work
    # it may do.
    budget: Callable[[dict], Budget] | None = None
    # True: the function's integer tensors are numbers it computes with (positions), not token
    # ids, so `.tolist()` of them counts toward the off-the-books limit (grading.judge.refusals).
    lists_integers: bool = False
    # Arguments the function changes by its contract (the cache a decoding step appends to):
    # the guards do not hold those to "left alone". Every other argument, an object of the
    # implementation's own class included, must be.
    changes: frozenset[str] = frozenset()


def _heads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int, int, int, int]:
    """(B·H, Nq, Nk, D, Dv) of an attention call."""
    return q.shape[0] * q.shape[1], q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]


def _inputs(*tensors: torch.Tensor) -> int:
    return sum(t.numel() for t in tensors)


def outside_kernels(args: dict) -> Budget:
    """A kernel task: the attention happens in the kernel; PyTorch around it only moves the
    inputs and the output (a few passes over each), whatever the number of keys, and multiplies
    only q and the output (or the partial results and their lse): never the keys or values, so
    that a single decoding query's q·kᵀ and p·v, no larger than k and v themselves, are
    the kernel's too."""
    q, k, v = args["q"], args["k"], args["v"]
    BH, Nq, Nk, D, Dv = _heads(q, k, v)
    group = q.shape[1] // max(k.shape[1], 1)  # grouped-query heads read their kv head
    splits = args.get("num_splits", 1)
    near = q.numel() + splits * BH * Nq * (Dv + 1)  # q, and the output or the partial results
    moved = near + group * (k.numel() + v.numel())
    # In the kernel, a program reads its block of at least 16 queries (all of them when fewer)
    # once per split and streams its head's keys and values past it once.
    streamed = BH * (splits * Nq * D + -(-Nq // 16) * Nk * (D + Dv))
    return Budget(
        4 * moved + ANY_CALL,
        f"outside the kernel, a few passes over the inputs and the output ({moved:,} elements)",
        kernel_loads=2 * streamed + ANY_CALL,
        kernel_what=(
            f"each program loads its block of at least 16 queries once per split and streams "
            f"its head's keys and values once ({streamed:,} elements)"
        ),
        products=4 * near + ANY_CALL,
        products_what=(
            f"outside the kernel, a few per element of q and of the output or the partial "
            f"results ({near:,} elements); products with k or v (q·kᵀ, p·v) belong in the kernel"
        ),
    )


def sliding_window_band(args: dict) -> Budget:
    """Each query scores at most 2·window keys (chunks of at most `window` queries, the last
    one padded, of at most 128 queries)."""
    q, k, v = args["q"], args["k"], args["v"]
    BH, Nq, Nk, D, Dv = _heads(q, k, v)
    W = min(args["window"], Nk)
    band = BH * (Nq + min(W, 128)) * 2 * W
    return Budget(
        4 * band * (2 * (D + Dv) + 16) + 32 * _inputs(q, k, v) + ANY_CALL,
        f"O(Nq · window · D): {band:,} (query, key) pairs in the band",
    )


def allowed_blocks(args: dict) -> Budget:
    """2 · bs² · (D + Dv) per allowed block and head."""
    q, k, v = args["q"], args["k"], args["v"]
    BH, Nq, Nk, D, Dv = _heads(q, k, v)
    pairs = BH * int(args["block_mask"].sum()) * args["block_size"] ** 2
    return Budget(
        8 * pairs * (2 * (D + Dv) + 16) + 32 * _inputs(q, k, v) + ANY_CALL,
        f"2 · bs² · (D + Dv) per allowed block: {pairs:,} (query, key) pairs",
    )


def linear_in_length(args: dict) -> Budget:
    """O(N · D · Dv): a D x Dv state per head, and chunks of at most 64 queries."""
    q, k, v = args["q"], args["k"], args["v"]
    BH, Nq, Nk, D, Dv = _heads(q, k, v)
    rows = BH * (Nq + Nk)
    return Budget(
        2 * rows * (4 * D * Dv + 64 * (D + Dv + 4)) + ANY_CALL,
        f"O(N · D · Dv): {rows:,} query and key rows, a {D} x {Dv} state",
    )


def _experts(T: int, d: int, h: int, E: int, k: int) -> Budget:
    routed = T * k * 3 * 2 * d * h  # three products per routed token
    weights = 3 * E * d * h  # each expert's weights read once
    router = 2 * T * d * E
    return Budget(
        3 * (routed + weights + router + 16 * T * (d + h) * k) + ANY_CALL,
        f"the router, then k = {k} experts per token ({T} tokens, {E} experts of {d} x {h})",
    )


def k_experts_per_token(args: dict) -> Budget:
    x, w1 = args["x"], args["w1"]
    E, d, h = w1.shape
    return _experts(x.shape[0], d, h, E, args["k"])


def k_experts_of_the_mixture(args: dict) -> Budget:
    moe, x = args["moe"], args["x"]
    E, (h, d) = len(moe.experts), moe.experts[0].w1.weight.shape
    return _experts(x.shape[0], d, h, E, moe.top_k)


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


_FUSED = "PyTorch's fused attention does the exercise for you"
_ATTENTION = Rule(FUSED_ATTENTION, _FUSED)
_KERNEL = Rule(
    FUSED_ATTENTION, "the task is to write the kernel yourself", kernel=True,
    budget=outside_kernels,
)  # fmt: skip
_SPLIT_KERNEL = Rule(
    FUSED_ATTENTION,
    "the task is to write the kernel yourself",
    kernel=True,
    probe=spreads_keys_over_programs,
    budget=outside_kernels,
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
        "sliding_window_attention": Rule(FUSED_ATTENTION, _FUSED, budget=sliding_window_band),
        "block_sparse_attention": Rule(FUSED_ATTENTION, _FUSED, budget=allowed_blocks),
        "linear_attention": Rule(FUSED_ATTENTION, _FUSED, budget=linear_in_length),
        "linear_attention_step": _ATTENTION,
        "sliding_window_decode_step": Rule(FUSED_ATTENTION, _FUSED, changes=frozenset({"cache"})),
    },
    "context_extension": {"rope_cos_sin": Rule(lists_integers=True)},
    "moe": {"moe_forward": Rule(budget=k_experts_per_token)},
    "serving": {"moe_feed_forward": Rule(budget=k_experts_of_the_mixture)},
}


def rules_for(kata: str) -> dict[str, Rule]:
    return RULES.get(kata, {})
