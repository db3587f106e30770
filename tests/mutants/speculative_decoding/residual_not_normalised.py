"""Bug: the residual max(0, p - q) is returned without dividing by its sum.

torch.multinomial accepts unnormalised weights, so sampling from it even works; but the function
promises a distribution, and anything else that reads it (an entropy, a log-probability) is
off by the rejection probability.
"""

CAUGHT_BY = ["test_residual_distribution_known_values"]
EDITS = [
    (
        "return torch.where(has_mass, excess / torch.where(has_mass, mass, 1), p)",
        "return torch.where(has_mass, excess, p)",
    ),
]
