"""Bug: paged_attention writes the softmax as exp(s) / sum(exp(s)) without subtracting the max.

The textbook formula; it works until a score passes about 88 in float32, where exp overflows to
inf and the output turns to NaN.
"""

CAUGHT_BY = ["test_paged_attention_extreme_scores"]
EDITS = [
    (
        "return (scores.softmax(dim=-1) @ v).to(q.dtype)",
        "weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)\n"
        "    return (weights @ v).to(q.dtype)",
    ),
]
