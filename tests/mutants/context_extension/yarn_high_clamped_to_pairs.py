"""Bug: YaRN clamps the ramp's upper end to the last pair, head_dim / 2 - 1, not head_dim - 1.

There are only head_dim / 2 pairs, so clamping to the last pair index looks right; Transformers
clamps to dim - 1, and with a long trained length the ramp then ends elsewhere.
"""

CAUGHT_BY = ["test_yarn_known_values", "test_yarn_inv_freq_matches_oracle"]
EDITS = [
    (
        "original_max_len)), head_dim - 1",
        "original_max_len)), head_dim // 2 - 1",
    ),
]
