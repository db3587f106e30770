"""Bug: the sliding window cuts the queries into chunks of 64 whatever the window.

A chunk of C queries reads C + window - 1 keys. At window 16 that is 79 keys per query, within
the budget; at window 1 it is 64 keys where 1 is needed: the work no longer follows the window.
"""

CAUGHT_BY = [
    "test_sliding_window_flops_grow_with_n_times_window",
]
EDITS = [
    (
        "    C = min(W, _MAX_QUERY_CHUNK)  # queries per chunk\n",
        "    C = 64  # queries per chunk\n",
    ),
]
