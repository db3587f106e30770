"""Bug: combine_partials subtracts the max lse even where it is -inf, so a query no part saw is NaN.

exp(lse_s - max lse) is the textbook weight; when every part of a query is empty (causal, more
queries than keys) the max is -inf too, and -inf - (-inf) is NaN instead of a weight of 0.
"""

CAUGHT_BY = ["test_combine_partials_merges_exact_parts"]
EDITS = [
    (
        "weights = torch.exp(lses - m_safe)",
        "weights = torch.exp(lses - m)",
    ),
]
