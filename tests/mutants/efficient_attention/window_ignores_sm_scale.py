"""Bug: the sliding window always scales scores by 1 / sqrt(D), ignoring sm_scale.

The default is right so every test without sm_scale passes; models with a tuned scale get the
wrong softmax temperature.
"""

CAUGHT_BY = [
    "test_sliding_window_matches_dense_band_attention",
    "test_sliding_window_sm_scale_zero_weighs_keys_alike",
]
EDITS = [
    (
        "    scale = _softmax_scale(sm_scale, D)\n",
        "    scale = _softmax_scale(None, D)\n",
    ),
]
