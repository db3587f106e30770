"""Bug: apply_rope returns x itself when the tables turn nothing (cos all 1, sin all 0).

Position 0 is the identity, so skipping the work there looks free; but the caller owns what it is
given: the result is then the input, and a caller that changes the result changes its x.
"""

CAUGHT_BY = ["test_position_zero_is_the_identity"]
EDITS = [
    (
        "    xc = x.to(compute)  # (..., N, D)\n",
        "    if x.dtype == compute and not sin.any() and bool((cos == 1).all()):\n"
        "        return x  # nothing turns\n"
        "    xc = x.to(compute)  # (..., N, D)\n",
    ),
]
