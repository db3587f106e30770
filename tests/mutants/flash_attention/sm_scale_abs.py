"""Bug: the softmax scale is taken as abs(sm_scale), as if a scale could only be a magnitude.

Every model passes a positive scale, so the sign looks like noise to clean up; a negative
sm_scale flips every score, and abs() gives the weights of the opposite keys.
"""

CAUGHT_BY = [
    "test_tiled_attention_matches_oracle",
    "test_flash_attention_matches_oracle",
    "test_split_kv_decode_matches_oracle",
]
EDITS = [
    (
        "return 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)",
        "return 1.0 / math.sqrt(D) if sm_scale is None else abs(float(sm_scale))",
    ),
]
