"""Cheat: split_kv_decode launches a single split whatever num_splits says.

One program per head then walks every key: the result is exact and the merge through
combine_partials is a no-op, so only the work per program shows it. Caught by the probe in
grading/judge/rules.py: over 256 keys in 4 splits, no kernel program may read every key.
"""

KATA = "flash_attention"
TESTS = ["test_split_kv_decode_matches_oracle"]
EXPECT = "num_splits ignored"
EDITS = [
    (
        "    outs, lses = _attention_forward(q, k, v, False, sm_scale, num_splits)",
        "    outs, lses = _attention_forward(q, k, v, False, sm_scale, 1)  # one split is enough",
    ),
]
