"""Bug: block_table returns the cache's own list instead of a copy.

Saving a copy per call looks free to skip, but the caller owns what it is given: a scheduler
that sorts, trims or extends the list it got rewrites the cache's table, and the sequence then
reads blocks that are not its own.
"""

CAUGHT_BY = ["test_interleaved_appends_gather_back_exactly"]
EDITS = [
    (
        "        return list(self.tables.get(seq_id, []))",
        "        return self.tables.get(seq_id, [])",
    ),
]
