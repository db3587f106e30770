"""Bug: linear attention adds 1e-6 to its denominator "for safety".

A habit from normalisations that can divide by zero; but phi = elu + 1 is positive, so the
denominator never is, and where the features are small (queries and keys below zero) the
epsilon outweighs a real part of it.
"""

CAUGHT_BY = ["test_linear_attention_with_small_features_adds_no_epsilon"]
EDITS = [
    (
        "return (numer.flatten(2, 3) / denom.flatten(2, 3)[..., None])[:, :, :n]",
        "return (numer.flatten(2, 3) / (denom.flatten(2, 3)[..., None] + 1e-6))[:, :, :n]",
    ),
]
