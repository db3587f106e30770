"""Cheat: combine_partials rescales the caller's `outs` in place instead of a copy.

It saves one temporary the size of all the partial results, and the merged result is right; but
the caller's partial results are now scaled by weights it never asked for. Caught by the guard
that compares every tensor argument before and after each call.
"""

KATA = "flash_attention"
TESTS = ["test_combine_partials_merges_exact_parts"]
EXPECT = "combine_partials changed its argument `outs` in place"
EDITS = [
    (
        "    outs = outs.masked_fill(torch.isneginf(lses)[..., None], 0.0)\n",
        "    outs.masked_fill_(torch.isneginf(lses)[..., None], 0.0)\n",
    ),
    (
        "    out = (weights[..., None] * outs.float()).sum(dim=0)  # (B, H, Nq, D)",
        "    outs.mul_(weights[..., None].to(outs.dtype))  # reuses the caller's memory\n"
        "    out = outs.float().sum(dim=0)  # (B, H, Nq, D)",
    ),
]
