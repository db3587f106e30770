"""Bug: freeing a sequence returns only its last block to the pool.

The block table is dropped but most blocks are never handed back: the pool leaks until the
server can admit no one.
"""

CAUGHT_BY = [
    "test_interleaved_appends_gather_back_exactly",
    "test_refused_append_changes_nothing_and_leaks_nothing",
]
EDITS = [
    (
        "self.free_list.extend(reversed(self.tables.pop(seq_id)))",
        "self.free_list.append(self.tables.pop(seq_id)[-1])",
    ),
]
