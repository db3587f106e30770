"""Bug: the kernel takes exp2 of the raw scores, without subtracting a running max.

Mathematically softmax does not need the shift, and small test inputs never overflow; scores
in the hundreds do (inf / inf gives NaN), and scores far below zero all underflow to 0.
"""

CAUGHT_BY = [
    "test_flash_attention_matches_oracle",
    "test_flash_attention_survives_scores_far_below_zero",
]
EDITS = [
    (
        """        alpha = tl.math.exp2((m_i - m_safe) * _LOG2E)
        p = tl.math.exp2((s - m_safe[:, None]) * _LOG2E)  # (BLOCK_M, BLOCK_N), each <= 1
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
""",
        """        p = tl.math.exp2(s * _LOG2E)  # (BLOCK_M, BLOCK_N)
        l_i = l_i + tl.sum(p, 1)
""",
    ),
]
