"""Bug: the causal key range of a query block ends one key early.

The last query of the block sees key (pid_m + 1) * BLOCK_M - 1 + Nk - Nq; mixing up inclusive
and exclusive ends of the range is the classic fence-post error.
"""

CAUGHT_BY = ["test_flash_attention_matches_oracle"]
EDITS = [
    (
        "hi = tl.minimum(hi, (pid_m + 1) * BLOCK_M + causal_shift)",
        "hi = tl.minimum(hi, (pid_m + 1) * BLOCK_M + causal_shift - 1)",
    ),
]
