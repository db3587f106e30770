"""Bug: append refuses when the blocks it needs are exactly the blocks left.

`>=` where `>` belongs: the last free blocks can never be used, and a sequence that only fills
its last block is refused even though it needs no new block at all.
"""

CAUGHT_BY = [
    "test_refused_append_changes_nothing_and_leaks_nothing",
    "test_running_out_of_blocks_is_a_clear_error",
]
EDITS = [
    (
        "if needed > len(self.free_list):  # refuse before taking anything",
        "if needed >= len(self.free_list):  # refuse before taking anything",
    ),
]
