"""Bug: the sliding window aligns queries top-left (query i at position i) instead of bottom-right.

With Nq == Nk both are the same, so tests with one length pass; with fewer queries than keys
(decoding, chunked prefill) each query reads the window of a much earlier position.
"""

CAUGHT_BY = [
    "test_sliding_window_worked_example_with_unequal_lengths",
    "test_sliding_window_matches_dense_band_attention",
]
EDITS = [
    (
        "    start = Nk - Nq - W + 1\n",
        "    start = -W + 1\n",
    ),
]
