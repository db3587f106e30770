"""Bug: the angles are formed in float64 and reduced mod 2 pi there, but cos and sin are taken in
float32.

The reduced angle fits float32 well, so it looks safe and is faster; but cos and sin of a
rounded angle are off by up to half a float32 step of the angle, many float32 steps of the
value where cos or sin is near 0.
"""

CAUGHT_BY = ["test_near_positions_round_each_entry_once"]
EDITS = [
    (
        "return angles.cos().to(torch.float32), angles.sin().to(torch.float32)",
        "angles = torch.remainder(angles, 2 * math.pi).to(torch.float32)\n"
        "    return angles.cos(), angles.sin()",
    ),
]
