"""Bug: linear attention returns phi(q)ᵀ S without dividing by phi(q)ᵀ z.

The numerator alone is what "linear attention = phi(Q) (phi(K)ᵀ V)" says at a glance; without z
the weights do not add up to one and outputs grow with the number of keys.
"""

CAUGHT_BY = [
    "test_linear_attention_worked_example",
    "test_linear_attention_matches_quadratic_form",
]
EDITS = [
    (
        "        out = (fq @ S) / (fq @ z[..., None])\n",
        "        out = fq @ S\n",
    ),
    (
        "    return (numer.flatten(2, 3) / denom.flatten(2, 3)[..., None])[:, :, :n]",
        "    return numer.flatten(2, 3)[:, :, :n]",
    ),
]
