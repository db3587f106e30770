"""Bug: match moves the free cached blocks it finds to the back of the free queue.

"Least recently used" suggests that a lookup is a use, as in an LRU cache whose `get` refreshes
the entry. But match only asks: a scheduler probes many prompts it may never start, and each
probe reorders eviction, so the blocks append takes next are not the ones the rules name.
"""

CAUGHT_BY = [
    "test_match_is_pure_and_exact",
    "test_eviction_takes_the_least_recently_freed_block_first",
]
EDITS = [
    (
        "        return len(self._cached_run(tokens)[0]) * self.block_size\n",
        "        found = self._cached_run(tokens)[0]\n"
        "        for block in found:  # a block asked for is recently used: it goes to the back\n"
        "            if block in self.queue:\n"
        "                self.queue.move_to_end(block)\n"
        "        return len(found) * self.block_size\n",
    ),
]
