"""Bug: in chunked causal linear attention, the state entering a chunk already holds that chunk.

An inclusive prefix sum (cumsum) where an exclusive one is needed: the chunk's own keys are
counted twice, and later keys of the chunk leak into earlier queries.
"""

CAUGHT_BY = [
    "test_linear_attention_matches_quadratic_form",
    "test_linear_attention_future_never_changes_the_past",
]
EDITS = [
    (
        "_exclusive_cumsum(fk.transpose(-1, -2) @ v, dim=2)",
        "(fk.transpose(-1, -2) @ v).cumsum(dim=2)",
    ),
    (
        "_exclusive_cumsum(fk.sum(dim=3), dim=2)",
        "fk.sum(dim=3).cumsum(dim=2)",
    ),
]
