"""Bug: the RoPE angles are formed in float32: positions.float() * inv_freq.

This is what most model code does, and it is fine at a few thousand positions; at 10^5 and beyond
a float32 angle has lost its last few thousandths of a radian, exactly where long context lives.
"""

CAUGHT_BY = ["test_far_positions_keep_float32_accuracy", "test_one_decoding_step_far_out"]
EDITS = [
    (
        "torch.outer(positions.to(torch.float64), inv_freq.to(torch.float64))",
        "torch.outer(positions.float(), inv_freq.float())",
    ),
]
