"""Bug: the ALiBi bias aligns queries top-left (p_i = i) instead of bottom-right.

With q_len == k_len both agree, so tests on square inputs pass; during decoding (one query, many
keys) the newest query is then treated as position 0 and every key looks like the future.
"""

CAUGHT_BY = [
    "test_alibi_bias_known_values",
    "test_alibi_bias_at_the_edges",
    "test_alibi_bias_matches_oracle",
]
EDITS = [
    (
        "query_pos = torch.arange(q_len) + (k_len - q_len)",
        "query_pos = torch.arange(q_len)",
    ),
]
