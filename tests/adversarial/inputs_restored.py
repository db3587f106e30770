"""Cheat: apply_rope rotates the caller's `x` in place, copies the result, then puts `x` back.

The rotation then needs no temporary of its own, and after the call `x` holds its old values
again, so comparing the arguments before and after the call sees nothing; but during the call
the caller's tensor held rotated numbers (whatever else reads that memory meanwhile sees them).
Caught because every write into an argument's memory during a call is recorded.
"""

KATA = "context_extension"
TESTS = ["test_apply_rope_known_values_at_position_1"]
EXPECT = "apply_rope wrote into its argument `x` during the call"
EDITS = [
    (
        "    compute = torch.promote_types(x.dtype, torch.float32)\n"
        "    xc = x.to(compute)  # (..., N, D)\n",
        "    compute = torch.promote_types(x.dtype, torch.float32)\n"
        "    if x.dtype == compute:  # rotate x itself, then put it back\n"
        "        saved = x.clone()  # (..., N, D)\n"
        "        s1, s2 = saved.chunk(2, dim=-1)\n"
        "        x.mul_(cos.to(compute))\n"
        "        x1, x2 = x.chunk(2, dim=-1)\n"
        "        half = D // 2\n"
        "        x1.sub_(s2 * sin[:, :half].to(compute))\n"
        "        x2.add_(s1 * sin[:, half:].to(compute))\n"
        "        out = x.clone()\n"
        "        x.copy_(saved)\n"
        "        return out\n"
        "    xc = x.to(compute)  # (..., N, D)\n",
    ),
]
