"""Bug: the sliding window's softmax takes exp() of the raw scores, without subtracting the row max.

Right for the scores people try first; once a score passes about 88, exp() is inf in float32,
inf / inf is NaN, and the row comes out as garbage.
"""

CAUGHT_BY = [
    "test_sliding_window_survives_scores_in_the_thousands",
]
EDITS = [
    (
        "    p = torch.exp(scores - row_max)  # masked entries: exp(-inf) = 0\n",
        "    p = torch.exp(scores)  # masked entries: exp(-inf) = 0\n",
    ),
    (
        "    return p / p.sum(dim=-1, keepdim=True).clamp_min(1.0)\n",
        "    return (p / p.sum(dim=-1, keepdim=True)).nan_to_num(0.0)\n",
    ),
]
