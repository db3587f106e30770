"""Bug: the scores for all keys are computed at once, an (Nq, Nk) matrix per head, then softmaxed.

The numbers are right, which is what makes it tempting; the memory is what FlashAttention exists
to save, and only the cost test notices.
"""

CAUGHT_BY = ["test_tiled_attention_never_builds_the_score_matrix"]
EDITS = [
    (
        """    for start in range(0, Nk, block_size):
        kb = k[:, :, None, start : start + block_size].float()  # (B, Hkv, 1, n, D)
        vb = v[:, :, None, start : start + block_size].float()
""",
        """    for start in range(0, Nk, Nk):  # every key in one block
        kb = k[:, :, None].float()  # (B, Hkv, 1, Nk, D)
        vb = v[:, :, None].float()
""",
    ),
]
