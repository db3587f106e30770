"""Bug: a negative sm_scale is taken as "no scale given" and replaced by 1 / sqrt(D).

`sm_scale if sm_scale > 0 else default` (or `>= 0`, to keep 0.0) reads as a sanity check, but a
negative scale is a scale: it gives the most weight to the most opposed key.
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
        "return 1.0 / math.sqrt(D) if sm_scale is None or sm_scale < 0 else float(sm_scale)",
    ),
]
