"""Bug: YaRN uses the fractional correction range, without floor(low) and ceil(high).

The paper's formula reads continuous, and floor/ceil look like a detail; but the released code and
every checkpoint tuned with it widen the range to whole pairs, so the frequencies differ.
"""

CAUGHT_BY = ["test_yarn_known_values", "test_yarn_inv_freq_matches_oracle"]
EDITS = [
    (
        ("low = max(math.floor(_correction_pair(beta_fast, head_dim, base, original_max_len)), 0)"),
        "low = max(_correction_pair(beta_fast, head_dim, base, original_max_len), 0)",
    ),
    (
        ("math.ceil(_correction_pair(beta_slow, head_dim, base, original_max_len)), head_dim - 1"),
        "_correction_pair(beta_slow, head_dim, base, original_max_len), head_dim - 1",
    ),
]
