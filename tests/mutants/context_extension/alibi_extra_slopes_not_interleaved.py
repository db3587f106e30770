"""Bug: extra ALiBi slopes (head counts not a power of two) are taken in order, not every other.

The paper takes the 1st, 3rd, 5th ... slopes of twice the power of two; dropping the [0::2] looks
like a simplification, but it repeats slopes the first heads already have.
"""

CAUGHT_BY = [
    "test_alibi_slopes_known_values",
    "test_alibi_slopes_match_the_paper",
    "test_alibi_slopes_lie_in_zero_one",
]
EDITS = [
    (
        "_geometric_slopes(2 * closest)[0::2][: n_heads - closest]",
        "_geometric_slopes(2 * closest)[: n_heads - closest]",
    ),
]
