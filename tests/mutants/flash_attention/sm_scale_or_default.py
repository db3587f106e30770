"""Bug: the softmax scale is `sm_scale or 1 / sqrt(D)`, so sm_scale=0.0 means the default.

`x or default` is the idiom for optional arguments, and every model passes None or a positive
scale; 0.0 is falsy, and a caller asking for equal weights gets the default scale instead.
"""

CAUGHT_BY = [
    "test_tiled_attention_matches_oracle",
    "test_flash_attention_matches_oracle",
    "test_flash_attention_with_lse_returns_the_log_sum_exp",
    "test_split_kv_decode_matches_oracle",
]
EDITS = [
    (
        "return 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)",
        "return float(sm_scale or 1.0 / math.sqrt(D))",
    ),
]
