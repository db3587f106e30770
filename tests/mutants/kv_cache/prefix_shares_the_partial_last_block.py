"""Bug: the partial last block is registered and shared too, under the tokens it holds so far.

"Cache everything we can" also caches the block a prompt ends in. The next sequence with that
prefix takes it and writes its own next token into it, over the slot the first sequence writes
its next token to: two sequences now read each other's keys.
"""

CAUGHT_BY = ["test_a_partial_last_block_is_private", "test_shared_blocks_are_never_written"]
EDITS = [
    (
        "        for i in range((len(tokens) - 1) // bs):  # the last token is always fed",
        "        for i in range(-(-(len(tokens) - 1) // bs)):  # the last token is always fed",
    ),
    (
        "            following = (key, tuple(tokens[i * bs : (i + 1) * bs]))",
        "            following = (key, tuple(tokens[: len(tokens) - 1][i * bs : (i + 1) * bs]))",
    ),
    (
        "        self.last_key[seq_id], self.tail[seq_id] = key, tail\n",
        "        self.last_key[seq_id], self.tail[seq_id] = key, tail\n"
        "        if tail and (key, tuple(tail)) not in self.cached:  # the partial block, too\n"
        "            self.cached[(key, tuple(tail))] = table[-1]\n"
        "            self.key_of[table[-1]] = (key, tuple(tail))\n",
    ),
    (
        "        return len(self._cached_run(tokens)[0]) * self.block_size",
        "        found = self._cached_run(tokens)[0]\n"
        "        return min(len(found) * self.block_size, len(tokens) - 1)",
    ),
    (
        "        self.lengths[seq_id] = len(found) * self.block_size\n"
        "        self.last_key[seq_id] = key\n"
        "        self.tail[seq_id] = []\n"
        "        return len(found) * self.block_size",
        "        n = min(len(found) * self.block_size, len(tokens) - 1)\n"
        "        self.lengths[seq_id] = n\n"
        "        self.last_key[seq_id] = key if n % self.block_size == 0 else key[0]\n"
        "        self.tail[seq_id] = [] if n % self.block_size == 0 else list(key[1])\n"
        "        return n",
    ),
]
