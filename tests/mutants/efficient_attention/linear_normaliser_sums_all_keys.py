"""Bug: causal linear attention divides by the sum of phi(k) over all keys, future ones included.

The numerator is made causal and the denominator forgotten: z is computed once for the whole
sequence, so early outputs shrink and depend on the future.
"""

CAUGHT_BY = [
    "test_linear_attention_worked_example",
    "test_linear_attention_matches_quadratic_form",
    "test_linear_attention_future_never_changes_the_past",
]
EDITS = [
    (
        "    denom = denom + (fq @ z[..., None]).squeeze(-1)\n",
        (
            "    z_all = z0 + fk.sum(dim=(2, 3))  # (B, H, D): every key, future ones too\n"
            "    denom = (fq @ z_all[:, :, None, :, None]).squeeze(-1)\n"
        ),
    ),
]
