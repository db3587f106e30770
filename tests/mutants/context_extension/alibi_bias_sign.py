"""Bug: the ALiBi bias has the wrong sign: +slope * (p_i - j) rewards distant keys.

BLOOM writes the bias as slope * j (a positive number) and relies on softmax ignoring a per-row
constant; mixing that with the distance form flips the sign.
"""

CAUGHT_BY = ["test_alibi_bias_known_values", "test_alibi_bias_matches_oracle"]
EDITS = [
    (
        "return -slopes[:, None, None] * distance",
        "return slopes[:, None, None] * distance",
    ),
]
