"""Bug: NTK raises the base to base * factor, without the exponent d / (d - 2).

The exponent looks like a detail; without it the slowest pair is slowed by factor ** ((d-2)/d)
instead of exactly factor, so the extended range falls short of what was asked for.
"""

CAUGHT_BY = [
    "test_scaled_frequencies_known_values",
    "test_ntk_keeps_the_fastest_pair_and_slows_the_slowest_by_the_factor",
]
EDITS = [
    (
        "_inv_freq64(head_dim, base * scale ** (head_dim / (head_dim - 2)))",
        "_inv_freq64(head_dim, base * scale)",
    ),
]
