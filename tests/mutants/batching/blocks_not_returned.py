"""Bug: a finished request's KV blocks are never given back to the pool.

Freeing on preemption but forgetting the ordinary exit leaks blocks: the pool looks full while
nothing runs, and waiting requests can never join.
"""

CAUGHT_BY = ["test_kv_blocks_are_never_over_committed_and_preemption_is_exact"]
EDITS = [
    (
        "            running.remove(seq)\n            pool.release(seq)\n",
        "            running.remove(seq)\n",
    )
]
