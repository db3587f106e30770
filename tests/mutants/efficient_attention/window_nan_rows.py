"""Bug: a query that sees no key (Nq > Nk) gets NaN from softmax over a row of -inf.

torch.softmax of a fully masked row is 0/0; the queries before the first key must return zeros.
"""

CAUGHT_BY = [
    "test_sliding_window_worked_example_with_unequal_lengths",
    "test_sliding_window_matches_dense_band_attention",
]
REPLACE = {
    "_softmax_or_zeros": """
def _softmax_or_zeros(scores, allowed):
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1)  # a row of -inf only gives NaN
""",
}
