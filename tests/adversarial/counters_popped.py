"""Cheat: the counters taken off the dispatch mode stack for a block, by PyTorch's own helper.

`torch.utils._python_dispatch._disable_current_modes()` pops every active mode (the judge's
counters among them) and pushes them back after the block; the work inside is invisible. Graded
submissions are refused by the source check; in a practice run the helper is refused while a
call runs under the counters.
"""

KATA = "efficient_attention"
TESTS = ["test_sliding_window_flops_grow_with_n_times_window"]
EXPECT = "counters off: the implementation called PyTorch's private torch.utils._python_dispatch"
EDITS = [
    (
        "    W = min(window, Nk)  # a window longer than the keys is plain causal attention\n",
        "    with torch.utils._python_dispatch._disable_current_modes():  # every score, unseen\n"
        "        dense = q.float() @ k.float().transpose(-1, -2)\n"
        "    W = min(window, Nk)  # a window longer than the keys is plain causal attention\n",
    ),
]
