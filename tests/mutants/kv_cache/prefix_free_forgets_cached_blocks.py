"""Bug: free unregisters the blocks it returns, so a freed prefix is never found again.

Treating "free" as "gone" is the paged cache's habit (level 3). Sharing still works between
sequences that run at the same time, but the next turn of a conversation, which comes after the
previous one was freed, recomputes its whole history: the cache is thrown away when it is most
useful.
"""

CAUGHT_BY = ["test_eviction_takes_the_least_recently_freed_block_first"]
EDITS = [
    (
        "                self.queue[block] = None  # a full block keeps its key; "
        "a partial one has none",
        "                self.queue[block] = None\n"
        "                if block in self.key_of:\n"
        "                    del self.cached[self.key_of.pop(block)]",
    ),
]
