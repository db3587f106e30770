"""Bug: sm_scale defaults with `sm_scale or 1 / sqrt(D)`, so sm_scale=0.0 is taken as "not given".

`x or default` is the Python idiom for a missing argument, but 0.0 is falsy: a caller asking for
uniform weights (scale 0) silently gets the default temperature instead.
"""

CAUGHT_BY = [
    "test_sliding_window_sm_scale_zero_weighs_keys_alike",
    "test_sliding_window_matches_dense_band_attention",
    "test_block_sparse_matches_dense_masked_attention",
    "test_decoding_equals_sliding_window_attention",
]
EDITS = [
    (
        "    return 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)\n",
        "    return float(sm_scale or 1.0 / math.sqrt(D))\n",
    ),
]
