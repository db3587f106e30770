"""Bug: gather returns every slot of the sequence's blocks, the unused tail of the last one too.

With lengths that are multiples of block_size it is right; otherwise attention also sees the
stale or zero slots after the last token.
"""

CAUGHT_BY = ["test_interleaved_appends_gather_back_exactly"]
EDITS = [
    (
        "        k = self.k_pool[table].transpose(0, 1).flatten(1, 2)[:, :n]\n"
        "        v = self.v_pool[table].transpose(0, 1).flatten(1, 2)[:, :n]\n",
        "        k = self.k_pool[table].transpose(0, 1).flatten(1, 2)\n"
        "        v = self.v_pool[table].transpose(0, 1).flatten(1, 2)\n",
    ),
]
