"""Bug: an explicit sm_scale is ignored: the scale is always 1 / sqrt(D).

Every model uses the default, so the argument is easy to accept and forget; callers that pass
their own scale (some models fold it into the weights) get the wrong softmax.
"""

CAUGHT_BY = ["test_tiled_attention_matches_oracle"]
EDITS = [
    (
        "scale = _softmax_scale(sm_scale, D)",
        "scale = 1.0 / math.sqrt(D)",
    ),
]
