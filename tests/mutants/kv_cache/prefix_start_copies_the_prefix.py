"""Bug: start copies the cached blocks into fresh blocks of its own instead of sharing them.

It saves the model's work (the prefix is not recomputed) and every number is right, but the
prefix is stored once more per request: the memory prefix caching exists to save is spent, and
start costs a copy of the whole prefix.
"""

CAUGHT_BY = ["test_start_copies_nothing", "test_shared_prefixes_gather_back_exactly"]
EDITS = [
    (
        "        for block in found:\n"
        "            self.refs[block] += 1\n"
        "            self.queue.pop(block, None)  # a free one is held again: it leaves the queue\n"
        "        self.tables[seq_id] = found\n",
        "        for block in found:\n"
        "            self.queue.pop(block, None)  # a free one is held again: it leaves the queue\n"
        "        copies = [self._take() for _ in found]\n"
        "        if found:\n"
        "            self.k_pool[copies] = self.k_pool[found]\n"
        "            self.v_pool[copies] = self.v_pool[found]\n"
        "        for block in found:\n"
        "            if self.refs[block] == 0:\n"
        "                self.queue[block] = None\n"
        "        self.tables[seq_id] = copies\n",
    ),
]
