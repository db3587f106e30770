"""Bug: YaRN divides by high - low without guarding a zero-width ramp (low == high).

With a short trained length both ends clamp to the same pair; 0 / 0 then gives NaN frequencies.
Transformers adds 0.001 to high in that case.
"""

CAUGHT_BY = ["test_yarn_known_values", "test_yarn_inv_freq_matches_oracle"]
EDITS = [
    (
        (
            "    if low == high:\n"
            "        high += 0.001  # a ramp of zero width would divide by zero\n"
        ),
        "",
    ),
]
