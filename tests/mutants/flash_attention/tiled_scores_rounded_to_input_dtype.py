"""Bug: each block's scores are stored in the input dtype before the softmax.

Keeping s in q's dtype halves the memory of a score block and looks harmless, since the
exponentials run in float32 afterwards; but scores in the hundreds lose their fractions in
float16 (a step of 0.25 above 256), which moves near-tied weights by a quarter.
"""

CAUGHT_BY = ["test_tiled_attention_with_near_tied_scores_far_from_zero"]
EDITS = [
    (
        "s = (qg @ kb.transpose(-1, -2)) * scale  # (B, Hkv, group, Nq, n)",
        "s = ((qg @ kb.transpose(-1, -2)) * scale).to(q.dtype).float()  # stored in q's dtype",
    ),
]
