"""Bug: new tokens take the most recently freed block first (a stack), not the least recently
freed.

A stack of free blocks is the natural pool, and without prefix caching the order does not
matter. With it, the block just freed is the one most likely to be asked for again (its system
prompt is in use), and a stack overwrites it first, while blocks that were never used wait.
"""

CAUGHT_BY = [
    "test_a_request_reads_only_past_its_cached_prefix",
    "test_prefix_caching_reads_a_third_of_the_prompts_on_a_shared_prefix_workload",
]
EDITS = [
    (
        "            block, _ = self.queue.popitem(last=False)  # the least recently freed\n",
        "            block, _ = self.queue.popitem(last=True)  # the most recently freed\n",
    ),
]
