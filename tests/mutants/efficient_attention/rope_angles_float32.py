"""Bug: decoding forms the RoPE angles p · rope_base^(-2i/D) in float32.

At position 10 the angles are exact enough; at position 3000 float32 is off by about 1e-4
radians, which already moves the scores past the float32 tolerance, and far worse later.
"""

CAUGHT_BY = [
    "test_decoding_thousands_of_steps_keeps_positions_exact",
]
EDITS = [
    (
        "torch.arange(0, D, 2, dtype=torch.float64, device=x.device)",
        "torch.arange(0, D, 2, dtype=torch.float32, device=x.device)",
    ),
]
