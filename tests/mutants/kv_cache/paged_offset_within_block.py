"""Bug: the paged cache writes token t at offset t // block_size instead of t % block_size.

Division and remainder get swapped; with scattered blocks the keys land in the wrong slots.
"""

CAUGHT_BY = [
    "test_interleaved_appends_gather_back_exactly",
    "test_pool_holds_the_tokens_where_the_block_table_says",
]
EDITS = [
    ("offsets = positions % bs  # (T,)", "offsets = (positions // bs) % bs  # (T,)"),
]
