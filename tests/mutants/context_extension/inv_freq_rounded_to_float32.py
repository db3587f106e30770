"""Bug: rope_cos_sin rounds inv_freq to float32 before forming the float64 angles.

inv_freq "is float32 anyway", so .float() looks free; but frequencies handed over in float64
lose their digits, and at position 10^6 the angle moves by hundredths of a radian.
"""

CAUGHT_BY = ["test_one_decoding_step_far_out"]
EDITS = [
    (
        "inv_freq.to(torch.float64))  # (N, D/2)",
        "inv_freq.float().to(torch.float64))  # (N, D/2)",
    ),
]
