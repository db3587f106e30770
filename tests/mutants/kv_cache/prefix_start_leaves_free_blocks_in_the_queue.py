"""Bug: start counts one more holder of each cached block, but leaves a free one in the free queue.

A prefix found among the freed blocks is taken back without being taken out of the queue: the
free count is too high, and a later append takes the block (and overwrites it) while a sequence
still reads it.
"""

CAUGHT_BY = ["test_shared_blocks_are_never_written", "test_prefix_workload_follows_the_rules"]
EDITS = [
    (
        "            self.queue.pop(block, None)  # a free one is held again: "
        "it leaves the queue\n",
        "",
    ),
]
