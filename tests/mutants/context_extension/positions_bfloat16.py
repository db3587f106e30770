"""Bug: the positions are cast to the model's bfloat16 before the angles are formed.

Building position ids in the activation dtype is a known real-world bug: bfloat16 holds integers
exactly only up to 256, so beyond that neighbouring tokens get the same position.
"""

CAUGHT_BY = ["test_far_positions_keep_float32_accuracy", "test_rope_cos_sin_matches_oracle"]
EDITS = [
    (
        "torch.outer(positions.to(torch.float64),",
        "torch.outer(positions.to(torch.bfloat16).to(torch.float64),",
    ),
]
