"""Bug: the residual divides by its sum without a fallback, giving NaN where p == q.

Rows with p == q are never rejected, so the NaN seems harmless; but the function must return a
distribution for every row, and a NaN row poisons anything computed from it.
"""

CAUGHT_BY = ["test_residual_distribution_known_values"]
EDITS = [
    (
        "return torch.where(has_mass, excess / torch.where(has_mass, mass, 1), p)",
        "return excess / mass",
    ),
]
