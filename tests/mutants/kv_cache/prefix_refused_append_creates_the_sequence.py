"""Bug: an append to an unknown seq_id creates the (empty) sequence before it checks for free
blocks, so a refused first append leaves the sequence behind.

Creating the sequence on first sight, then doing the work, is the usual shape of "created on
first append"; the OutOfBlocks check sits after it. The refused append was meant to change
nothing, yet gather, free and start now see a sequence the caller never got.
"""

CAUGHT_BY = ["test_out_of_blocks_changes_nothing"]
EDITS = [
    (
        "        length, held = self.length(seq_id), self.tables.get(seq_id, [])\n",
        "        if seq_id not in self.tables:  # a new sequence: create it\n"
        "            self.tables[seq_id], self.lengths[seq_id] = [], 0\n"
        "            self.last_key[seq_id], self.tail[seq_id] = None, []\n"
        "        length, held = self.length(seq_id), self.tables.get(seq_id, [])\n",
    ),
]
