"""Bug: block-sparse attention takes exp() of the raw scores, without the row maximum.

Merging blocks by adding exp(score) is simplest without a maximum; with scores past about 88
exp() overflows to inf in float32 and the merged row is NaN.
"""

CAUGHT_BY = [
    "test_block_sparse_survives_scores_in_the_thousands",
]
EDITS = [
    (
        "    p = torch.exp(scores - row_max[:, :, rows, :, None])  # (B, H, P, bs, bs)\n",
        "    p = torch.exp(scores)  # (B, H, P, bs, bs)\n",
    ),
    (
        "    out = numer / denom.clamp_min(1.0)[..., None]  # denom >= 1 wherever a key is seen\n",
        "    out = (numer / denom[..., None]).nan_to_num(0.0)\n",
    ),
]
