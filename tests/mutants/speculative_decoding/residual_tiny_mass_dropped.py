"""Bug: a residual mass below 1e-9 is treated as no mass at all, and p is returned.

A threshold feels safer than comparing a float with zero; but a mass of 1e-12 is still a
distribution to sample from after a rejection, and p puts weight where the residual has none.
"""

CAUGHT_BY = ["test_residual_distribution_normalises_a_tiny_mass"]
EDITS = [
    (
        "    has_mass = mass > 0\n",
        "    has_mass = mass > 1e-9\n",
    ),
]
