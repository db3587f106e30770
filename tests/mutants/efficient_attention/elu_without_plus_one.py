"""Bug: linear attention uses phi(x) = elu(x) instead of elu(x) + 1.

Without the +1 features can be negative or zero, so phi(q)·z can vanish or change sign: the
"+1" is what keeps every weight positive.
"""

CAUGHT_BY = [
    "test_linear_attention_worked_example",
    "test_linear_attention_matches_quadratic_form",
]
EDITS = [
    (
        "    return F.elu(x) + 1.0\n",
        "    return F.elu(x)\n",
    ),
]
