"""Bug: append takes blocks one at a time and raises OutOfBlocks when the free list runs dry.

It is the natural loop ("while I need a block, pop one"), and the error is raised; but the blocks
taken before the pool ran dry are never given back: a refused append leaks them and leaves a
half-created sequence behind.
"""

CAUGHT_BY = ["test_refused_append_changes_nothing_and_leaks_nothing"]
EDITS = [
    (
        "        if needed > len(self.free_list):  "
        "# refuse before taking anything: nothing changes\n",
        "        table = self.tables.setdefault(seq_id, [])\n"
        "        self.lengths.setdefault(seq_id, start)\n"
        "        while needed and self.free_list:\n"
        "            table.append(self.free_list.pop())\n"
        "            needed -= 1\n"
        "        if needed:\n",
    ),
]
