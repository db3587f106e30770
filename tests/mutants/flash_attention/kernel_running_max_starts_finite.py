"""Bug: the kernel starts the running max m_i at -1e30 instead of -inf.

Tutorial kernels often do, to keep inf - inf out of the arithmetic. When every visible score is
below -1e30, the max never moves off its start, every exp(s - m) is 0, and the output is 0.
"""

CAUGHT_BY = ["test_flash_attention_with_every_score_below_any_mask_constant"]
EDITS = [
    (
        '    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)',
        "    m_i = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)",
    ),
]
