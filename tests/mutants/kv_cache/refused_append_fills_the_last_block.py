"""Bug: an append refused for want of blocks first writes the tokens that fit in the last block.

Filling the sequence's partly filled last block before finding that the rest needs more free
blocks than there are: OutOfBlocks is raised and the tables are untouched, but k_pool and v_pool
have changed (the README: when the free blocks are too few, nothing changes).
"""

CAUGHT_BY = ["test_refused_append_leaves_the_pool_alone"]
EDITS = [
    (
        "        if needed > len(self.free_list):  # refuse before taking anything",
        "        room = len(table) * bs - start\n"
        "        if needed > len(self.free_list) and room > 0:\n"
        "            fit = torch.arange(start, start + min(room, T))\n"
        "            self.k_pool[table[-1], :, fit % bs] = k[:, : len(fit)].transpose(0, 1)\n"
        "            self.v_pool[table[-1], :, fit % bs] = v[:, : len(fit)].transpose(0, 1)\n"
        "        if needed > len(self.free_list):  # refuse before taking anything",
    ),
]
