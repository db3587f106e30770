"""Bug: the sliding window reads window + 1 keys: p - window <= j <= p instead of p - window < j.

"The last `window` keys" and "keys within distance `window`" sound alike; the second one counts
the query's own position on top and reads one key too many.
"""

CAUGHT_BY = [
    "test_sliding_window_worked_example",
]
EDITS = [
    (
        "    W = min(window, Nk)  #",
        "    W = min(window + 1, Nk)  #",
    ),
]
