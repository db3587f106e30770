"""Bug: sliding_window_decode_step scales the scores by 1 / sqrt(D) whatever sm_scale it is given.

Every other argument of the decode step is used; this one is easy to forget because the
default hides it.
"""

CAUGHT_BY = [
    "test_decoding_equals_sliding_window_attention",
]
EDITS = [
    (
        "squeeze(-1) * _softmax_scale(sm_scale, D)  # (B, H, n)",
        "squeeze(-1) * _softmax_scale(None, D)  # (B, H, n)",
    ),
]
