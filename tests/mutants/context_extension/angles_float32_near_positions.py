"""Bug: a float32 fast path for short inputs: positions below 256 get float32 angles.

At small positions a float32 angle looks harmless, and the tests at far positions never take the
path; but 255 * inv_freq in float32 is off by up to half a float32 step of the angle, a few
hundred float32 steps of cos and sin, where the README asks for angles formed in float64.
"""

CAUGHT_BY = ["test_near_positions_keep_float32_accuracy"]
EDITS = [
    (
        "    angles = torch.outer(positions.to(torch.float64), inv_freq.to(torch.float64))",
        "    angles = torch.outer(positions.to(torch.float64), inv_freq.to(torch.float64))\n"
        "    if positions.numel() and positions.abs().max() < 256:\n"
        "        angles = torch.outer(positions.float(), inv_freq.float()).double()",
    ),
]
